package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mdLink matches a Markdown link or image, [text](target) or
// ![alt](target), its text possibly over several lines; the target is
// group 1.
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// codeSpan matches an inline code span, whose brackets are no link.
var codeSpan = regexp.MustCompile("`[^`\n]*`")

// prose returns the lines of a Markdown document outside its fenced code
// blocks, whose text is not Markdown.
func prose(doc string) []string {
	var lines []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			lines = append(lines, line)
		}
	}
	return lines
}

// withoutCode returns a Markdown document's prose without its inline code
// spans, whose brackets are no link.
func withoutCode(doc string) string {
	var b strings.Builder
	for _, line := range prose(doc) {
		b.WriteString(codeSpan.ReplaceAllString(line, "``") + "\n")
	}
	return b.String()
}

// heading matches an ATX heading, its text in group 1.
var heading = regexp.MustCompile(`^#{1,6} (.+?)\s*$`)

// headingAnchors returns the fragments GitHub gives the headings of a
// Markdown document: a repeated heading's second fragment ends in -1, its
// third in -2.
func headingAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(doc) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// markdownFiles returns the repository's Markdown documents, relative to
// its root: every .md file outside hidden directories and testdata.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var docs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			docs = append(docs, rel(t, path))
		}
		return nil
	})
	require.NoError(t, err)
	return docs
}

// TestDocsLinksResolve checks every relative link of the repository's
// Markdown documents (README.md, docs/*.md and the others): the file or
// directory it names exists, and a #fragment names a heading of the
// document it points into.
func TestDocsLinksResolve(t *testing.T) {
	docs := markdownFiles(t)
	require.Contains(t, docs, "README.md")
	n := 0
	for _, doc := range docs {
		text := readFile(t, doc)
		for _, m := range mdLink.FindAllStringSubmatch(withoutCode(text), -1) {
			target := m[1]
			if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
				continue // a URL
			}
			n++
			path, frag, _ := strings.Cut(target, "#")
			where := doc + ": (" + target + ")"
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
				if _, err := os.Stat(filepath.Join(root, file)); err != nil {
					t.Errorf("%s: %s does not exist", where, file)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			assert.True(t, headingAnchors(readFile(t, file))[frag], "%s: %s has no heading whose fragment is #%s", where, file, frag)
		}
	}
	assert.Positive(t, n, "no relative link found")
}

// The link checker sees what GitHub renders: links over two lines,
// images, fragments of repeated headings, and no link inside code.
func TestLinksParse(t *testing.T) {
	doc := "# A title\n\n## Run `go test`\n\n## Run `go test`\n\n[GUIDE.md\n§2](docs/GUIDE.md#2-x) ![svg](a.svg)\n`[no](link)`\n```sh\n[no](link)\n# no heading\n```\n"
	var got []string
	for _, m := range mdLink.FindAllStringSubmatch(withoutCode(doc), -1) {
		got = append(got, m[1])
	}
	assert.Equal(t, []string{"docs/GUIDE.md#2-x", "a.svg"}, got)
	assert.Equal(t, map[string]bool{"a-title": true, "run-go-test": true, "run-go-test-1": true}, headingAnchors(doc))
}
