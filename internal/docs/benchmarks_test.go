package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// maxBullets is how many interpretation bullets a section may have after
// its Measured line.
const maxBullets = 5

// section is one `## ` section of BENCHMARKS.md: its title line and the
// lines after it, up to the next `## ` title.
type section struct {
	title string
	lines []string
}

// benchmarkSections reads BENCHMARKS.md and returns its sections; the
// text before the first `## ` title is not a section.
func benchmarkSections(t *testing.T) []section {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "BENCHMARKS.md"))
	require.NoError(t, err)
	var sections []section
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			sections = append(sections, section{title: line})
		} else if len(sections) > 0 {
			s := &sections[len(sections)-1]
			s.lines = append(s.lines, line)
		}
	}
	require.NotEmpty(t, sections, "BENCHMARKS.md has no `## ` section")
	return sections
}

var (
	numberedTitle = regexp.MustCompile(`^## (\d+)\. \S`)
	scaleTitle    = regexp.MustCompile(`^## Scale: \S`)
	goalLine      = regexp.MustCompile(`^Goal: (none, a reference figure|.*\bissue \d+)`)
	measuredLine  = regexp.MustCompile(`^Measured on \d{4}-\d{2}-\d{2}\b.*\bload average\b`)
)

// TestBenchmarksSectionsHaveTheirParts keeps BENCHMARKS.md one current
// document: every section is numbered in order (or is the scale section),
// and says, in this order, what it measures, its goal (with the issue
// that set it), the bound measured beside it, its commands, its figures,
// and once when, where and at what load they were measured, followed by
// a few bullets at most.
func TestBenchmarksSectionsHaveTheirParts(t *testing.T) {
	next := 1
	for _, s := range benchmarkSections(t) {
		t.Run(s.title, func(t *testing.T) {
			if m := numberedTitle.FindStringSubmatch(s.title); m != nil {
				assert.Equal(t, strconv.Itoa(next), m[1], "sections are numbered 1, 2, 3, ... in order")
				next++
			} else {
				assert.Regexp(t, scaleTitle, s.title, "a title is `## N. Title` or `## Scale: ...`")
			}
			checkSectionParts(t, s.lines)
		})
	}
}

// checkSectionParts checks the parts of one section's lines and their
// order.
func checkSectionParts(t *testing.T, lines []string) {
	t.Helper()
	first := firstNonEmpty(lines)
	goal := onlyLine(t, lines, "Goal:")
	bound := onlyLine(t, lines, "Bound:")
	sh := firstLine(lines, "```sh")
	measured := onlyLine(t, lines, "Measured on ")
	if first < 0 || goal < 0 || bound < 0 || measured < 0 {
		return
	}
	require.GreaterOrEqual(t, sh, 0, "no ```sh block of commands")
	assert.Less(t, first, goal, "a paragraph saying what is measured comes before the Goal: line")
	assert.Regexp(t, goalLine, lines[goal], "the goal names its issue, or is `none, a reference figure`")
	assert.Less(t, goal, bound, "Goal: comes before Bound:")
	assert.Greater(t, len(strings.TrimSpace(strings.TrimPrefix(lines[bound], "Bound:"))), 0, "Bound: says what")
	assert.Less(t, bound, sh, "the commands come after Bound:")
	assert.Less(t, sh, measured, "the commands come before the Measured line")
	assert.Regexp(t, measuredLine, lines[measured], "Measured on <date>, <machine>, load average <before> to <after>.")
	assert.True(t, hasFigures(lines[sh:measured]), "no figures (a table or an output block) between the commands and the Measured line")
	checkBullets(t, lines[measured+1:])
}

// checkBullets checks that what follows the Measured line is at most
// maxBullets bullets (with their continuation lines).
func checkBullets(t *testing.T, lines []string) {
	t.Helper()
	bullets := 0
	for _, line := range lines {
		switch {
		case strings.HasPrefix(line, "- "):
			bullets++
		case strings.TrimSpace(line) == "", strings.HasPrefix(line, "  ") && bullets > 0:
		default:
			t.Errorf("after the Measured line only bullets may follow, found %q", line)
			return
		}
	}
	assert.LessOrEqual(t, bullets, maxBullets, "bullets after the Measured line")
}

// hasFigures reports whether lines hold a table row or a block other than
// a sh block (a program's output).
func hasFigures(lines []string) bool {
	inBlock := false
	for _, line := range lines {
		switch {
		case strings.HasPrefix(line, "```") && inBlock:
			inBlock = false
		case strings.HasPrefix(line, "```"):
			if line != "```sh" {
				return true
			}
			inBlock = true
		case strings.HasPrefix(line, "|") && !inBlock:
			return true
		}
	}
	return false
}

// onlyLine returns the index of the one line that starts with prefix, or
// -1 after reporting that there is none or more than one.
func onlyLine(t *testing.T, lines []string, prefix string) int {
	t.Helper()
	at, n := -1, 0
	for i, line := range lines {
		if strings.HasPrefix(line, prefix) {
			at, n = i, n+1
		}
	}
	if n != 1 {
		t.Errorf("%d lines start with %q, want exactly 1", n, prefix)
		return -1
	}
	return at
}

// firstLine returns the index of the first line equal to s, or -1.
func firstLine(lines []string, s string) int {
	for i, line := range lines {
		if line == s {
			return i
		}
	}
	return -1
}

// firstNonEmpty returns the index of the first line with text, or -1.
func firstNonEmpty(lines []string) int {
	for i, line := range lines {
		if strings.TrimSpace(line) != "" {
			return i
		}
	}
	return -1
}

// diary matches the words of a document that tells which machine or
// session measured what, in place of one current figure.
var diary = regexp.MustCompile(`(?i)\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(st|nd|rd|th))\s+(machine|session)|session's machine|earlier sessions?|(this|other|previous) sessions?\b|sessions' |(busy|busier|slower|quiet) day|(previous|earlier) runs?\b`)

// TestBenchmarksIsNoDiary keeps the history of measurements in git, not in
// BENCHMARKS.md.
func TestBenchmarksIsNoDiary(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "BENCHMARKS.md"))
	require.NoError(t, err)
	for i, line := range strings.Split(string(b), "\n") {
		if m := diary.FindString(line); m != "" {
			t.Errorf("BENCHMARKS.md:%d: %q: a diary of machines; keep one current figure", i+1, m)
		}
	}
}

// TestBenchmarksLinksResolve checks that every link into BENCHMARKS.md,
// from the repository's documents and from its own goals table, names a
// heading it has.
func TestBenchmarksLinksResolve(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "BENCHMARKS.md"))
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			anchors[anchor(strings.TrimLeft(line, "# "))] = true
		}
	}
	docs, err := filepath.Glob(filepath.Join(root, "*.md"))
	require.NoError(t, err)
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`\]\(#([\w-]+)\)`).FindAllStringSubmatch(string(b), -1) {
		assert.True(t, anchors[m[1]], "BENCHMARKS.md links to its own #%s, which has no such heading", m[1])
	}
	link := regexp.MustCompile(`BENCHMARKS\.md#([\w-]+)`)
	for _, doc := range append(docs, more...) {
		text, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			assert.True(t, anchors[m[1]], "%s links to BENCHMARKS.md#%s, which has no such heading", doc, m[1])
		}
	}
}

// anchor returns the fragment GitHub gives a heading: lower case, spaces
// to hyphens, letters, digits, hyphens and underscores kept, the rest
// (punctuation, symbols such as §) dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestBenchmarksIndex checks that each row of the index at the top of
// BENCHMARKS.md gives a command of the section it links to, as the
// section writes it (a block's `cd dir` line joined to the next with &&;
// a `|` of the command escaped as `\|`, as a table cell needs), and that
// every section has its row, so that the index and the sections cannot
// drift apart.
func TestBenchmarksIndex(t *testing.T) {
	commandsOf := map[string][]string{} // by the section's anchor
	for _, s := range benchmarkSections(t) {
		a := anchor(strings.TrimPrefix(s.title, "## "))
		for _, block := range shBlocks(s.lines) {
			uncommented := func(line string) string { return strings.TrimSpace(strings.SplitN(line, " #", 2)[0]) }
			for i, line := range block {
				line = uncommented(line)
				commandsOf[a] = append(commandsOf[a], line)
				if strings.HasPrefix(line, "cd ") && i+1 < len(block) {
					commandsOf[a] = append(commandsOf[a], line+" && "+uncommented(block[i+1]))
				}
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "BENCHMARKS.md"))
	require.NoError(t, err)
	preamble, _, _ := strings.Cut(string(b), "\n## ")
	_, index, found := strings.Cut(preamble, "\n| what | command | section |\n")
	require.True(t, found, "BENCHMARKS.md has no index (| what | command | section |) before its first section")
	row := regexp.MustCompile("^\\| [^|]+ \\| `(.+)` \\| \\[[^]]+\\]\\(#([\\w-]+)\\) \\|$")
	n := 0
	for _, line := range strings.Split(index, "\n") {
		if !strings.HasPrefix(line, "|") {
			break // the table's end
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		m := row.FindStringSubmatch(line)
		if !assert.NotNil(t, m, "BENCHMARKS.md's index: a row not in the form | what | `command` | [§](#section) |: %s", line) {
			continue
		}
		n++
		assert.Contains(t, commandsOf[m[2]], strings.ReplaceAll(m[1], `\|`, "|"), "the index's row for #%s: its command is not one of that section's", m[2])
	}
	assert.Len(t, benchmarkSections(t), n, "BENCHMARKS.md's index has a row per section")
}
