package pgtest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// skips counts the tests of this process that skipped for want of a
// database, and keeps the first reason.
var skips struct {
	mu    sync.Mutex
	count int
	why   string
}

func countSkip(why string) {
	skips.mu.Lock()
	defer skips.mu.Unlock()
	if skips.count == 0 {
		skips.why = why
	}
	skips.count++
}

// Main runs the package's tests and returns m.Run's exit code, for
// os.Exit. A package whose tests use pgtest calls it from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// When some tests skipped for want of a database, Main says so in one
// line on stderr ("3 Postgres tests skipped in ./outbox: DATABASE_URL is
// not set"). go test shows a passing package's output only with -v, -json
// or in local directory mode (go test with no package argument): in
// package list mode (go test ./...) it prints the "ok" line alone. So
// when the run passed without -v and stderr is not a terminal, Main also
// writes the line to the controlling terminal (/dev/tty), if there is
// one, so that a person running go test ./... sees it; CI has none.
func Main(m *testing.M) int {
	code := m.Run()
	skips.mu.Lock()
	count, why := skips.count, skips.why
	skips.mu.Unlock()
	if count == 0 {
		return code
	}
	line := skipLine(count, why, packageDir())
	fmt.Fprint(os.Stderr, line)
	if code == 0 && !testing.Verbose() && !isTerminal(os.Stderr) {
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			_, _ = io.WriteString(tty, line)
			_ = tty.Close()
		}
	}
	return code
}

// skipLine is Main's one line.
func skipLine(count int, why, pkg string) string {
	tests := "tests"
	if count == 1 {
		tests = "test"
	}
	return fmt.Sprintf("%d Postgres %s skipped in %s: %s (bash .ci/run starts Postgres and sets DATABASE_URL)\n",
		count, tests, pkg, why)
}

// packageDir is the package under test as a directory relative to its
// module's root ("./outbox"): go test runs a test binary in its package's
// directory.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "this package"
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}

// isTerminal reports whether f is a character device, a terminal: what a
// person already sees.
func isTerminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
