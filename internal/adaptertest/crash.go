//go:build unix

package adaptertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// The child process's environment: the database URL makes the test binary
// a child that serves the API; the crash switch makes it SIGKILL itself
// when a handler has returned and before its outcome is committed.
const (
	envChildDB    = "IDEM_ADAPTERTEST_DB"
	envChildCrash = "IDEM_ADAPTERTEST_CRASH"
	listening     = "adaptertest: listening on "
)

// Main is the adapter's TestMain: in a child process started by [Crash]
// it serves the API built by build and never returns; else it runs the
// tests under pgtest.Main and exits.
func Main(m *testing.M, build Build) {
	if url := os.Getenv(envChildDB); url != "" {
		if err := serveChild(url, build); err != nil {
			fmt.Fprintln(os.Stderr, "adaptertest child:", err)
			os.Exit(2)
		}
	}
	os.Exit(pgtest.Main(m))
}

// serveChild serves the API on a loopback port, says where on stdout, and
// serves until it is killed.
func serveChild(url string, build Build) error {
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		return err
	}
	var hooks server.Hooks
	if os.Getenv(envChildCrash) != "" {
		hooks.Handled = func(context.Context, server.Event) { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(listening + "http://" + ln.Addr().String())
	return http.Serve(ln, build(&App{pool: pool}, server.NewPostgresStore(pool), server.Config{Hooks: hooks}))
}

// child is a running child process.
type child struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
	stderr strings.Builder
	mu     sync.Mutex
}

// startChild starts the test binary as a child serving on the database at
// url, with the crash switch when crash is true.
func startChild(t *testing.T, url string, crash bool) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildDB+"="+url)
	if crash {
		cmd.Env = append(cmd.Env, envChildCrash+"=handled")
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = c
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.exited })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the child's first line; its log:\n%s", c.log())
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	u, ok := strings.CutPrefix(strings.TrimSpace(line), listening)
	require.True(t, ok, "the child's first line %q", line)
	c.url = u
	return c
}

func (c *child) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.Write(p)
}

func (c *child) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// Crash: a process killed (SIGKILL) after the handler returned and
// before the commit leaves no payment, and the retry with the same key,
// on a new process over the same database, makes exactly one.
func Crash(t *testing.T, build Build) {
	url := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, url)
	require.NoError(t, Setup(t.Context(), pool))
	a := &api{app: &App{pool: pool}}
	key := uuid.NewString()

	doomed := startChild(t, url, true)
	_, err := pay(doomed.url, "crash", key)
	require.Error(t, err, "the request to a process that dies before its commit has no answer")
	select {
	case <-doomed.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not die within 30s")
	}
	ws, ok := doomed.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"the child ended %v, want SIGKILL; log:\n%s", doomed.cmd.ProcessState, doomed.log())
	assert.Zero(t, a.count(t, "crash"), "payments after the crash")

	fresh := startChild(t, url, false)
	got := mustPay(t, fresh.url, "crash", key)
	assert.Equal(t, http.StatusCreated, got.status, "the retry: %s", got.body)
	assert.False(t, got.replayed)
	assert.Equal(t, 1, a.count(t, "crash"), "payments after the retry")
}
