//go:build unix

package pgtest

import (
	"os"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// goTest runs go test with args in testdata/skipping, without
// DATABASE_URL, CI set to ci, and in a session of its own: no
// controlling terminal, so that Main's /dev/tty line cannot reach the
// terminal of whoever runs these tests.
func goTest(t *testing.T, ci string, args ...string) (string, error) {
	t.Helper()
	goBin, err := osexec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	cmd := osexec.Command(goBin, append([]string{"test", "-count=1"}, args...)...)
	cmd.Dir = "testdata/skipping"
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "CI=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "CI="+ci)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMainCountsSkips: without DATABASE_URL a package's Postgres tests
// skip, and Main says how many in one line, which go test shows without
// -v in local directory mode; under CI=true the same tests fail.
func TestMainCountsSkips(t *testing.T) {
	out, err := goTest(t, "")
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	want := "2 Postgres tests skipped in ./internal/pgtest/testdata/skipping: DATABASE_URL is not set"
	if strings.Count(out, want) != 1 {
		t.Errorf("go test printed\n%s\nwant the line %q once", out, want)
	}
	if strings.Contains(out, "--- SKIP") {
		t.Errorf("go test without -v printed the skipped tests one by one:\n%s", out)
	}

	out, err = goTest(t, "true")
	if err == nil || !strings.Contains(out, "--- FAIL: TestFirst") || !strings.Contains(out, "--- FAIL: TestSecond") {
		t.Errorf("under CI=true go test = %v\n%s\nwant TestFirst and TestSecond to fail", err, out)
	}
}

func TestSkipLine(t *testing.T) {
	if got, want := skipLine(1, "DATABASE_URL is not set", "./outbox"),
		"1 Postgres test skipped in ./outbox: DATABASE_URL is not set (bash .ci/run starts Postgres and sets DATABASE_URL)\n"; got != want {
		t.Errorf("skipLine(1, ...) = %q, want %q", got, want)
	}
}
