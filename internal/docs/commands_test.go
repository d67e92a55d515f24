package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchmarksCommandsExist checks that every command in BENCHMARKS.md's
// sh blocks refers to what the repository has: the directories it cds
// into, the scripts and programs it runs (and their flags), the packages
// it tests, and for every -bench pattern a Benchmark function of that
// package that it matches (and every -args -bench.* flag that package
// declares). A renamed benchmark or a moved program fails here.
func TestBenchmarksCommandsExist(t *testing.T) {
	n := 0
	for _, s := range benchmarkSections(t) {
		for _, block := range shBlocks(s.lines) {
			dir := root // each block starts at the repository's root
			for _, line := range block {
				for _, words := range commands(line) {
					dir = checkCommand(t, s.title, dir, words)
					n++
				}
			}
		}
	}
	assert.Positive(t, n, "no command found in BENCHMARKS.md")
}

// shBlocks returns the lines of the ```sh blocks of lines, a line ending
// in a backslash joined with the next.
func shBlocks(lines []string) [][]string {
	var blocks [][]string
	var block []string
	in, pending := false, ""
	for _, line := range lines {
		switch {
		case !in && line == "```sh":
			in, block = true, nil
		case in && strings.HasPrefix(line, "```"):
			in = false
			blocks = append(blocks, block)
		case in && strings.HasSuffix(line, `\`):
			pending += strings.TrimSuffix(line, `\`) + " "
		case in:
			block = append(block, pending+line)
			pending = ""
		}
	}
	return blocks
}

// commands splits a shell line into its simple commands' words: quotes
// removed, a comment dropped, split at &&, ||, ;, and |; a loop's `for`
// and `done` are dropped and a leading `do` is removed.
func commands(line string) [][]string {
	var cmds [][]string
	var words []string
	for _, w := range shellWords(line) {
		if w == "&&" || w == "||" || w == ";" || w == "|" {
			cmds, words = appendCommand(cmds, words), nil
			continue
		}
		words = append(words, w)
	}
	return appendCommand(cmds, words)
}

func appendCommand(cmds [][]string, words []string) [][]string {
	if len(words) > 0 && words[0] == "do" {
		words = words[1:]
	}
	if len(words) == 0 || words[0] == "for" || words[0] == "done" {
		return cmds
	}
	return append(cmds, words)
}

// shellWords splits a line into words as sh would, for the simple lines
// of a benchmark document: single and double quotes, `#` comments, and
// the operators &&, ||, ; and | as words of their own.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				end = len(line) - i - 1
			}
			w.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			flush()
			return words
		case c == ';' || c == '|' || c == '&':
			flush()
			op := string(c)
			if i+1 < len(line) && line[i+1] == c {
				op, i = op+op, i+1
			}
			words = append(words, op)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words
}

// repoPath matches a word that names a file or directory of the
// repository.
var repoPath = regexp.MustCompile(`^(\./|\.\./|(bench|server|otelidem|examples|testserver|e2e|internal|cmd|docs)/)`)

// checkCommand checks one command run in dir and returns the directory
// the next command runs in.
func checkCommand(t *testing.T, title, dir string, words []string) string {
	t.Helper()
	where := title + ": " + strings.Join(words, " ")
	switch {
	case words[0] == "cd":
		require.Len(t, words, 2, where)
		next := filepath.Join(dir, words[1])
		assert.DirExists(t, next, where)
		return next
	case len(words) > 1 && words[0] == "go" && words[1] == "test":
		checkGoTest(t, where, dir, words[2:])
		return dir
	case len(words) > 1 && words[0] == "go" && words[1] == "run":
		checkGoRun(t, where, dir, words[2:])
		return dir
	}
	for _, w := range words[1:] {
		if repoPath.MatchString(w) {
			assert.FileExists(t, filepath.Join(dir, w), where)
		}
	}
	if words[0] == "bash" {
		require.Greater(t, len(words), 1, where)
		if !repoPath.MatchString(words[1]) { // checked above when it is
			assert.FileExists(t, filepath.Join(dir, words[1]), where)
		}
	}
	return dir
}

// valueFlags are the go test flags used in BENCHMARKS.md that take a
// value as the next word.
var valueFlags = map[string]bool{
	"-run": true, "-bench": true, "-benchtime": true, "-count": true,
	"-cpuprofile": true, "-memprofile": true, "-o": true, "-timeout": true,
}

// checkGoTest checks the arguments of `go test`: its packages have tests,
// its -bench pattern matches one of their Benchmark functions, and the
// flags after -args are declared in them.
func checkGoTest(t *testing.T, where, dir string, args []string) {
	t.Helper()
	var pkgs, binFlags []string
	pattern := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case a == "-args":
			binFlags = args[i+1:]
			i = len(args)
		case valueFlags[name] && !hasValue && i+1 < len(args):
			value = args[i+1]
			i++
			fallthrough
		case valueFlags[name]:
			if name == "-bench" {
				pattern = value
			}
		case !strings.HasPrefix(a, "-"):
			pkgs = append(pkgs, filepath.Join(dir, a))
		}
	}
	if len(pkgs) == 0 {
		pkgs = []string{dir}
	}
	tests := ""
	for _, pkg := range pkgs {
		text := goFiles(t, pkg, "_test.go")
		assert.True(t, text != "", "%s: %s has no tests", where, pkg)
		tests += text
	}
	if pattern != "" {
		checkBenchPattern(t, where, pattern, tests)
	}
	for _, f := range binFlags {
		name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if strings.HasPrefix(f, "-") {
			assert.True(t, declaresFlag(tests, name), "%s: the flag -%s is declared by no test of the package", where, name)
		}
	}
}

// benchFunc matches the declaration of a Benchmark function.
var benchFunc = regexp.MustCompile(`(?m)^func (Benchmark\w*)\(\w+ \*testing\.B\)`)

// checkBenchPattern checks that each alternative of the top level of a
// -bench pattern (the part before the first slash, split at the |s
// outside parentheses) matches a Benchmark function of tests, so that a
// renamed benchmark is found even when another alternative still matches.
func checkBenchPattern(t *testing.T, where, pattern, tests string) {
	t.Helper()
	top, _, _ := strings.Cut(pattern, "/")
	var funcs []string
	for _, m := range benchFunc.FindAllStringSubmatch(tests, -1) {
		funcs = append(funcs, m[1])
	}
	for _, alt := range alternatives(top) {
		re, err := regexp.Compile(alt)
		require.NoError(t, err, where)
		if !slices.ContainsFunc(funcs, re.MatchString) {
			t.Errorf("%s: -bench %q: %q matches no Benchmark function of the package", where, pattern, alt)
		}
	}
}

// alternatives splits a regular expression at its top-level |s.
func alternatives(re string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range re {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case '|':
			if depth == 0 {
				out = append(out, re[start:i])
				start = i + 1
			}
		}
	}
	return append(out, re[start:])
}

// flagWord matches a word that is a flag (-name or -name=value), not a
// quoted value that starts with a dash (-pg-options '-c a=b -c c=d').
var flagWord = regexp.MustCompile(`^--?[A-Za-z][\w.-]*(=.*)?$`)

// declaresFlag reports whether src declares the flag name with package
// flag's functions (flag.Int("name", ...), fs.DurationVar(&v, "name", ...)),
// or -db with dbflag.Var.
func declaresFlag(src, name string) bool {
	if name == "db" && strings.Contains(src, "dbflag.Var(") {
		return true
	}
	re := regexp.MustCompile(`\.(Bool|Int|Int64|Uint|Uint64|Float64|String|Duration|Func|Text)?(Var)?\([^"\n)]*"` + regexp.QuoteMeta(name) + `"`)
	return re.MatchString(src)
}

// checkGoRun checks the arguments of `go run`: the program exists and
// declares the flags given to it (after go's own, such as -v, which come
// before the program).
func checkGoRun(t *testing.T, where, dir string, args []string) {
	t.Helper()
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if valueFlags[args[0]] {
			args = args[1:]
		}
		args = args[1:]
	}
	require.NotEmpty(t, args, where)
	prog := filepath.Join(dir, args[0])
	src := goFiles(t, prog, ".go")
	if !assert.True(t, src != "", "%s: no program in %s", where, prog) {
		return
	}
	for _, a := range args[1:] {
		if flagWord.MatchString(a) {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			assert.True(t, declaresFlag(src, name), "%s: the program declares no flag -%s", where, name)
		}
	}
}

// goFiles returns the text of the files of dir whose names end in suffix,
// concatenated, or "" when there is none.
func goFiles(t *testing.T, dir, suffix string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var text strings.Builder
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), suffix) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		text.Write(b)
	}
	return text.String()
}

// The parser of the checks above splits the shell lines that the document
// uses as sh would.
func TestCommandsSplitsShellLines(t *testing.T) {
	tests := []struct {
		line string
		want [][]string
	}{
		{`go test -run '^$' -bench 'BenchmarkPayment$' ./server/`, [][]string{{"go", "test", "-run", "^$", "-bench", "BenchmarkPayment$", "./server/"}}},
		{`cd bench/hedge && go run . -rounds 21`, [][]string{{"cd", "bench/hedge"}, {"go", "run", ".", "-rounds", "21"}}},
		{`go run ./bench/storm   # 2,500 POSTs`, [][]string{{"go", "run", "./bench/storm"}}},
		{`go run ./bench/reconcile -db "$DATABASE_URL"`, [][]string{{"go", "run", "./bench/reconcile", "-db", "$DATABASE_URL"}}},
		{`for p in 1 2; do`, nil},
		{`  go tool pprof -top x | grep 'a|b'`, [][]string{{"go", "tool", "pprof", "-top", "x"}, {"grep", "a|b"}}},
		{`done`, nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, commands(tt.line), "commands(%q)", tt.line)
	}
}
