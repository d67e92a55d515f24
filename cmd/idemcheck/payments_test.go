package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/conformance"
	"github.com/idemkit/idem/internal/gobuild"
	"github.com/idemkit/idem/internal/pgtest"
)

// build is the payments server program, compiled once for the package's
// tests into dir, which TestMain removes.
var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// paymentsServer builds (once) and starts examples/payments/server with
// args on a free loopback port, creates the account the tests pay from,
// and returns its base URL. The process is killed when the test ends.
func paymentsServer(t *testing.T, args ...string) string {
	t.Helper()
	build.once.Do(func() {
		if build.dir, build.err = os.MkdirTemp("", "idemcheck-test-"); build.err == nil {
			build.bin = filepath.Join(build.dir, "payments-server")
			build.err = gobuild.BuildIn(filepath.Join("..", "..", "examples", "payments", "server"), ".", build.bin)
		}
	})
	require.NoError(t, build.err)
	// -db= first: in memory unless args name a database, whatever
	// DATABASE_URL (the program's default) says.
	cmd := exec.Command(build.bin, append([]string{"-addr", "127.0.0.1:0", "-db="}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	log := &logBuffer{}
	cmd.Stderr = log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var url string
	select {
	case line := <-lines:
		const prefix = "payments server: listening on "
		require.True(t, strings.HasPrefix(line, prefix), "first line %q; log:\n%s", line, log)
		url = strings.TrimSpace(strings.TrimPrefix(line, prefix))
	case <-time.After(20 * time.Second):
		t.Fatalf("the payments server did not listen within 20s; log:\n%s", log)
	}
	createAccount(t, url)
	return url
}

// createAccount gives tenant acme the account "idemcheck", with funds for
// every payment of a run.
func createAccount(t *testing.T, url string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url+"/v1/accounts/idemcheck", strings.NewReader(`{"balance_cents": 100000000}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer acme:alice")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// logBuffer collects the server's log for failure messages.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// paymentsArgs point the command at the payments API at url, with every
// check enabled, and the faults of seed 1, as fakeArgs: a random seed met
// other faults at each run, and the tests passed or failed by the seed
// (requireAllPass wants the 12 operations ok).
func paymentsArgs(url string) []string {
	return []string{
		"-url", url + "/v1/payments", "-body", paymentBody,
		"-header", "Authorization: Bearer acme:alice", "-principal2", "Authorization: Bearer acme:bob",
		"-key-required", "-id-field", "payment_id",
		"-count-url", url + "/v1/accounts/idemcheck", "-count-field", "payment_count",
		"-n", "12", "-attempt-timeout", "300ms", "-seed", "1", "-timeout", "60s",
	}
}

// requireAllPass asserts that every required check passed and that the
// equivalent-JSON check found a replay (the server canonicalises JSON).
func requireAllPass(t *testing.T, code int, doc document) {
	t.Helper()
	want := map[string]conformance.Verdict{}
	for _, name := range conformance.CheckNames() {
		want[name] = conformance.Pass
	}
	want["equivalent-json"] = conformance.Info
	assert.Equal(t, want, doc.verdicts(), "checks:\n%s", pretty(doc))
	assert.Equal(t, exitPass, code)
	eq, _ := findCheck(doc, "equivalent-json")
	assert.Contains(t, eq.Detail, "replayed")
	faults, _ := findCheck(doc, "faults")
	assert.Contains(t, faults.Detail, "12 operations")
	assert.Contains(t, faults.Detail, "12 ok, 0 failed, 0 unknown; 12 effects")
	outcome, _ := findCheck(doc, "outcome")
	assert.Contains(t, outcome.Detail, "Idempotency-Operation-State, Idempotency-Operation-Ref, Idempotency-Safe-New-Key, Idempotency-Key-Expires")
}

// findCheck returns the named check's result.
func findCheck(d document, name string) (conformance.Result, bool) {
	for _, c := range d.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return conformance.Result{}, false
}

func TestPaymentsServerMemory(t *testing.T) {
	t.Parallel()
	url := paymentsServer(t)
	code, doc := idemcheckJSON(t, paymentsArgs(url)...)
	requireAllPass(t, code, doc)
}

func TestPaymentsServerPostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.SchemaURL(t)
	url := paymentsServer(t, "-db", db)
	code, doc := idemcheckJSON(t, paymentsArgs(url)...)
	requireAllPass(t, code, doc)
}
