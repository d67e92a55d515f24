package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestContractNamesEveryProblem keeps docs/CONTRACT.md's outcome table and
// the code's problem names one set: every problem name constant of
// internal/wire and of this package (by declaration, so that a new one
// counts without a list to update) is in the table, and every problem the
// table names is a constant.
func TestContractNamesEveryProblem(t *testing.T) {
	inCode := problemConstants(t, "../internal/wire/problem.go", "Problem")
	inCode = append(inCode, problemConstants(t, "problem.go", "problem")...)
	slices.Sort(inCode)
	require.NotEmpty(t, inCode)

	doc, err := os.ReadFile("../docs/CONTRACT.md")
	require.NoError(t, err)
	inDoc := problemsInOutcomeTable(t, string(doc))
	assert.Equal(t, inCode, inDoc, "problem names in the code (left) and in CONTRACT.md §4's table (right)")
}

// problemConstants returns the values of the string constants of file whose
// names start with prefix and continue with an upper-case letter, and whose
// values are problem names (lower-case words joined by hyphens; not the
// media type).
func problemConstants(t *testing.T, file, prefix string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	require.NoError(t, err)
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, id := range spec.Names {
			rest, ok := strings.CutPrefix(id.Name, prefix)
			if !ok || rest == "" || rest[0] < 'A' || rest[0] > 'Z' || i >= len(spec.Values) {
				continue
			}
			lit, ok := spec.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			v, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			if problemNamePattern.MatchString(v) {
				names = append(names, v)
			}
		}
		return true
	})
	return names
}

var problemNamePattern = regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)

// problemsInOutcomeTable returns the problem names in the third column of
// the table of §4, sorted.
func problemsInOutcomeTable(t *testing.T, doc string) []string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## 4. Outcomes")
	require.True(t, ok, "CONTRACT.md has no section 4. Outcomes")
	section, _, _ = strings.Cut(section, "\n## ")
	name := regexp.MustCompile("`([a-z-]+)`")
	var names []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[3], -1) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

// TestCommentsCiteTheContract keeps the code's citations of the contract
// pointing at docs/CONTRACT.md and at sections it has: "docs/CONTRACT.md §N".
func TestCommentsCiteTheContract(t *testing.T) {
	doc, err := os.ReadFile("../docs/CONTRACT.md")
	require.NoError(t, err)
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\d+)\. `).FindAllStringSubmatch(string(doc), -1) {
		sections[m[1]] = true
	}
	cite := regexp.MustCompile(`([A-Za-z/]*)CONTRACT(\.md)?( §(\d+)| section (\d+))?`)
	cited := 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "contract_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range cite.FindAllStringSubmatch(string(src), -1) {
			cited++
			assert.Equal(t, "docs/CONTRACT.md", m[1]+"CONTRACT"+m[2], "%s cites %q", path, m[0])
			assert.Empty(t, m[5], "%s cites %q: write §N", path, m[0])
			if m[4] != "" {
				assert.True(t, sections[m[4]], "%s cites %q: CONTRACT.md has no section %s", path, m[0], m[4])
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Positive(t, cited)
}
