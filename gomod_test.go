package idem

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leanRequirements are the only modules the root go.mod may require
// directly: what the client and the server middleware need. Everything
// else it requires must be asked for, at that very version, by one of
// them or by their own requirements. River, River UI, chi, chromedp and
// the other heavy dependencies live in the nested modules (outbox, admin,
// examples, ...).
var leanRequirements = []string{
	"github.com/google/uuid",
	"github.com/sony/gobreaker/v2",
	"golang.org/x/time",
	"github.com/stretchr/testify",
	"github.com/jackc/pgx/v5",
}

// requirement is one require line of a go.mod, as go mod edit -json
// prints it.
type requirement struct {
	Path     string
	Version  string
	Indirect bool
}

// An app that adds the client or the server middleware gets only what
// they need: the root go.mod requires nothing beyond leanRequirements
// and what they require, and no version higher than they ask for.
func TestGoModIsLean(t *testing.T) {
	var mod struct {
		Go      string
		Require []requirement
	}
	require.NoError(t, json.Unmarshal(goOutput(t, "mod", "edit", "-json"), &mod))
	graph := string(goOutput(t, "mod", "graph"))
	for _, p := range leanProblems(mod.Require, graph) {
		t.Error(p)
	}

	// The go directive is the oldest release upstream still supports, and
	// the README's Install section names it.
	release := strings.Join(strings.SplitN(mod.Go, ".", 3)[:2], ".")
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, install, _ := strings.Cut(string(readme), "\n## Install\n")
	install, _, _ = strings.Cut(install, "\n## ")
	assert.Contains(t, install, "Go "+release, "the Install section names the go directive's release (go %s)", mod.Go)
}

// The committed go.work joins every module of the repository, so that
// the documents' commands (go run ./examples/payments, go test ./outbox/)
// work from the root of a clone; a module missing from it fails here.
func TestGoWorkUsesEveryModule(t *testing.T) {
	var modules []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".":
			return filepath.SkipDir
		case d.Name() == "go.mod":
			modules = append(modules, "./"+filepath.ToSlash(filepath.Dir(path)))
		}
		return nil
	})
	require.NoError(t, err)
	var work struct{ Use []struct{ DiskPath string } }
	require.NoError(t, json.Unmarshal(goOutput(t, "work", "edit", "-json", "go.work"), &work))
	var used []string
	for _, u := range work.Use {
		used = append(used, "./"+strings.TrimPrefix(u.DiskPath, "./"))
	}
	slices.Sort(modules)
	slices.Sort(used)
	assert.Equal(t, modules, used, "go.work's use directives (go work use -r . adds a new module)")
}

// goOutput runs the go command on the root module alone (no go.work) and
// returns its standard output.
func goOutput(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	var stderr []byte
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "go %s\n%s", strings.Join(args, " "), stderr)
	return out
}

// leanProblems returns a sentence for each requirement of reqs that
// leanRequirements do not explain: a direct one not among them, or an
// indirect one that no module reachable from them in graph (go mod
// graph's output) requires at that version.
func leanProblems(reqs []requirement, graph string) []string {
	allowed := map[string]bool{}
	for _, p := range leanRequirements {
		allowed[p] = true
	}
	var starts []string
	for _, r := range reqs {
		if allowed[r.Path] {
			starts = append(starts, r.Path+"@"+r.Version)
		}
	}
	reached := reachable(starts, graph)
	var problems []string
	for _, r := range reqs {
		switch {
		case allowed[r.Path]:
		case !r.Indirect:
			problems = append(problems, "go.mod requires "+r.Path+" directly; the root module may require only "+
				strings.Join(leanRequirements, ", ")+" (move what needs more into a module of its own)")
		case !reached[r.Path+"@"+r.Version]:
			problems = append(problems, "go.mod requires "+r.Path+" "+r.Version+
				", which none of "+strings.Join(leanRequirements, ", ")+" requires at that version")
		}
	}
	return problems
}

// reachable returns the nodes (path@version) of graph, go mod graph's
// output, reachable from starts.
func reachable(starts []string, graph string) map[string]bool {
	edges := map[string][]string{}
	for line := range strings.Lines(graph) {
		from, to, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok {
			edges[from] = append(edges[from], to)
		}
	}
	seen := map[string]bool{}
	queue := starts
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		seen[n] = true
		queue = append(queue, edges[n]...)
	}
	return seen
}

// leanProblems finds a heavy module required directly, one that came in
// with it (or raised a version) as an indirect requirement, and passes a
// go.mod that needs nothing more than the lean five.
func TestLeanProblems(t *testing.T) {
	graph := `github.com/idemkit/idem github.com/jackc/pgx/v5@v5.12.0
github.com/jackc/pgx/v5@v5.12.0 golang.org/x/text@v0.41.0
github.com/jackc/pgx/v5@v5.12.0 github.com/jackc/puddle/v2@v2.2.3
github.com/jackc/puddle/v2@v2.2.3 golang.org/x/sync@v0.1.0
github.com/riverqueue/river@v0.51.2 golang.org/x/text@v0.43.0
github.com/riverqueue/river@v0.51.2 github.com/tidwall/gjson@v1.20.0
`
	pgx := requirement{Path: "github.com/jackc/pgx/v5", Version: "v5.12.0"}
	tests := []struct {
		name string
		reqs []requirement
		want []string // a word of each problem, in order
	}{
		{"lean", []requirement{pgx,
			{Path: "golang.org/x/text", Version: "v0.41.0", Indirect: true},
			{Path: "golang.org/x/sync", Version: "v0.1.0", Indirect: true}}, nil},
		{"River directly", []requirement{pgx, {Path: "github.com/riverqueue/river", Version: "v0.51.2"}}, []string{"riverqueue/river directly"}},
		{"River's requirement", []requirement{pgx, {Path: "github.com/tidwall/gjson", Version: "v1.20.0", Indirect: true}}, []string{"gjson v1.20.0"}},
		{"a version River raised", []requirement{pgx, {Path: "golang.org/x/text", Version: "v0.43.0", Indirect: true}}, []string{"x/text v0.43.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := leanProblems(tt.reqs, graph)
			require.Len(t, got, len(tt.want), "leanProblems = %q", got)
			for i, w := range tt.want {
				assert.Contains(t, got[i], w)
			}
		})
	}
}
