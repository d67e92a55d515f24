package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxReadmeLines is README.md's length at most (issue 33): the front door
// orients, and the guides in docs/ hold the rest.
const maxReadmeLines = 250

// TestReadmeIsShort holds README.md to maxReadmeLines lines.
func TestReadmeIsShort(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(readFile(t, "README.md"), "\n"), "\n")
	assert.LessOrEqual(t, len(lines), maxReadmeLines, "README.md's lines: move detail into a guide in docs/")
}

// fence is a fenced code block of a Markdown document: its info string
// (the words after the opening backticks), its text, and the line it
// opens on.
type fence struct {
	info, text string
	line       int
}

// fences returns the fenced code blocks of a Markdown document.
func fences(doc string) []fence {
	var out []fence
	var cur *fence
	var body []string
	for i, line := range strings.Split(doc, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur, body = &fence{info: strings.TrimSpace(strings.TrimPrefix(line, "```")), line: i + 1}, nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = strings.Join(body, "\n")
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, line)
		}
	}
	return out
}

// snippetDocs are the documents whose Go blocks may name their source.
func snippetDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

// TestReadmeSnippetsAreCompiled keeps the Go of README.md and of the
// guides in docs/ compiled: every ```go block names, after the language,
// the Go file it is (```go internal/docs/tour/client.go), and equals that
// file from its import block to its end; or it names a file and a
// function of it (```go internal/docs/tour/guide_server.go GuideMounting)
// and equals that function's body, one tab of indentation removed, or,
// when the block starts with "func ", the whole declaration. go vet and
// go test compile those files, in whichever module holds them.
func TestReadmeSnippetsAreCompiled(t *testing.T) {
	n := 0
	for _, doc := range snippetDocs(t) {
		for _, f := range fences(readFile(t, rel(t, doc))) {
			lang, ref, _ := strings.Cut(f.info, " ")
			if lang != "go" {
				continue
			}
			where := rel(t, doc) + ":" + strconv.Itoa(f.line)
			src, fn, _ := strings.Cut(ref, " ")
			if src == "" {
				t.Errorf("%s: a Go block that names no compiled file (```go path/to/file.go [Func])", where)
				continue
			}
			n++
			var want string
			if fn == "" {
				want = afterPackageClause(t, readFile(t, src))
			} else {
				want = funcText(t, src, fn, strings.HasPrefix(f.text, "func "))
			}
			assert.Equal(t, want, f.text, "%s: the block is not the text of %s %s", where, src, fn)
		}
	}
	assert.Positive(t, n, "no Go snippet found in README.md")
}

// funcText returns the body of the function name of the Go file src,
// without its braces and with one tab of indentation removed, or, when
// whole is true, its declaration without its doc comment.
func funcText(t *testing.T, src, name string, whole bool) string {
	t.Helper()
	text := readFile(t, src)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, src, text, 0)
	require.NoError(t, err)
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != name || fd.Recv != nil {
			continue
		}
		if whole {
			return text[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset]
		}
		body := text[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset]
		lines := strings.Split(strings.Trim(body, "\n"), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, "\t")
		}
		return strings.Join(lines, "\n")
	}
	t.Fatalf("%s declares no function %s", src, name)
	return ""
}

// afterPackageClause returns a Go file's text after its package clause,
// without the blank lines around it.
func afterPackageClause(t *testing.T, src string) string {
	t.Helper()
	first, rest, ok := strings.Cut(src, "\n")
	require.True(t, ok && strings.HasPrefix(first, "package "), "a snippet's file starts with its package clause")
	return strings.Trim(rest, "\n")
}

// moduleLine matches the module directive of a go.mod.
var moduleLine = regexp.MustCompile(`(?m)^module (\S+)$`)

// TestReadmeInstallNamesTheModules checks the README's Install section
// against the go.mods: the go get line and the replace name the root
// module's path, each nested module it names is the root's path plus its
// directory, as the replace it shows assumes, and the commands it installs
// are the programs of cmd/.
func TestReadmeInstallNamesTheModules(t *testing.T) {
	readme := readFile(t, "README.md")
	_, install, ok := strings.Cut(readme, "\n## Install\n")
	require.True(t, ok, "README.md has no Install section")
	install, _, _ = strings.Cut(install, "\n## ")
	mod := moduleLine.FindStringSubmatch(readFile(t, "go.mod"))
	require.NotNil(t, mod, "go.mod has no module line")
	for _, want := range []string{
		"go get " + mod[1] + "\n",
		"go get " + mod[1] + "@v0.0.0",
		"-replace " + mod[1] + "=../idem",
		"require " + mod[1] + " v0.0.0\n",
		"replace " + mod[1] + " => ../idem\n",
		mod[1] + "/otelidem => ../idem/otelidem",
		"go install ./cmd/idemcheck ./cmd/idemctl",
	} {
		assert.Contains(t, install, want, "README.md's Install section")
	}
	for _, nested := range []string{"outbox", "admin", "otelidem", "idemredis", "ginidem", "echoidem", "echo5idem"} {
		assert.Contains(t, install, "`"+nested+"`", "README.md's Install section names the module %s", nested)
		m := moduleLine.FindStringSubmatch(readFile(t, filepath.Join(nested, "go.mod")))
		require.NotNil(t, m, "%s/go.mod has no module line", nested)
		assert.Equal(t, mod[1]+"/"+nested, m[1], "%s/go.mod's module", nested)
	}
	for _, cmd := range []string{"idemcheck", "idemctl"} {
		assert.Contains(t, goFiles(t, filepath.Join(root, "cmd", cmd), ".go"), "package main", "cmd/%s is a command", cmd)
	}
}

// TestReadmeCommandsExist checks the commands of README.md's sh blocks
// as TestBenchmarksCommandsExist does BENCHMARKS.md's: the programs they
// run and the flags they give them exist.
func TestReadmeCommandsExist(t *testing.T) {
	n := 0
	for _, block := range shBlocks(strings.Split(readFile(t, "README.md"), "\n")) {
		for _, line := range block {
			for _, words := range commands(line) {
				checkCommand(t, "README.md", root, words)
				n++
			}
		}
	}
	assert.Positive(t, n, "no command found in README.md")
}

// readFile returns the text of the file at path, relative to the
// repository's root.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	require.NoError(t, err)
	return string(b)
}

// rel returns path relative to the repository's root.
func rel(t *testing.T, path string) string {
	t.Helper()
	r, err := filepath.Rel(root, path)
	require.NoError(t, err)
	return r
}

// TestServerDocScopeIsCompiled keeps the tenantAndUser of server's package
// doc the function that the README's server (internal/docs/tour) defines
// and compiles, so that the doc's Mounting shows a defined Scope.
func TestServerDocScopeIsCompiled(t *testing.T) {
	funcOf := func(src string) string {
		_, f, ok := strings.Cut(src, "\nfunc tenantAndUser(")
		require.True(t, ok, "no func tenantAndUser")
		f, _, ok = strings.Cut(f, "\n}\n")
		require.True(t, ok, "func tenantAndUser has no end")
		return "func tenantAndUser(" + f + "\n}"
	}
	var doc strings.Builder
	for _, line := range strings.Split(readFile(t, "server/doc.go"), "\n") {
		if code, ok := strings.CutPrefix(line, "//\t"); ok {
			doc.WriteString(code + "\n")
		}
	}
	assert.Equal(t, funcOf(readFile(t, "internal/docs/tour/server.go")), funcOf("\n"+doc.String()), "server/doc.go's tenantAndUser")
}
