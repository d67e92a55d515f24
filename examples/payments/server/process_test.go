//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/gobuild"
	"github.com/idemkit/idem/internal/pgtest"
)

// build is the program, compiled once for all the tests of the package
// (the first buildServer builds it) into dir, which TestMain removes.
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

// buildServer returns the compiled program, building it on the first call.
func buildServer(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		if build.dir, build.err = os.MkdirTemp("", "payments-server-test-"); build.err != nil {
			return
		}
		build.bin = filepath.Join(build.dir, "server")
		build.err = gobuild.Build(".", build.bin)
	})
	require.NoError(t, build.err)
	return build.bin
}

// process is a running server program.
type process struct {
	cmd    *exec.Cmd
	addr   string // host:port it listens on
	url    string
	stderr *lockedBuffer
	exited chan struct{} // closed when the process has exited
}

// lockedBuffer collects the process's log for failure messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServer runs bin with args and the extra environment (KEY=value),
// and waits (at most 20 s) for its "listening" line. The process is
// killed when the test ends. It runs in memory unless args name a
// database (-db), whatever DATABASE_URL (the program's default) says.
func startServer(t *testing.T, bin string, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, append([]string{"-db="}, args...)...), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.exited })

	select {
	case line := <-lines:
		const prefix = "payments server: listening on http://"
		require.True(t, strings.HasPrefix(line, prefix), "first line %q, want %q...; log:\n%s", line, prefix, p.stderr)
		p.addr = strings.TrimSpace(strings.TrimPrefix(line, prefix))
		p.url = "http://" + p.addr
	case <-time.After(20 * time.Second):
		t.Fatalf("the server did not listen within 20s; log:\n%s", p.stderr)
	}
	return p
}

// wait waits (at most 20 s) for the process to exit and returns how.
func (p *process) wait(t *testing.T) *os.ProcessState {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState
	case <-time.After(20 * time.Second):
		t.Fatalf("the server did not exit within 20s; log:\n%s", p.stderr)
		return nil
	}
}

// waitLog waits (at most 20 s) for the process to log text.
func (p *process) waitLog(t *testing.T, text string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.stderr.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not log %q within 20s; log:\n%s", text, p.stderr)
		}
		time.Sleep(10 * time.Millisecond) // polling for the log line, not waiting for time to pass
	}
}

// kill sends SIGKILL and waits for the process to die.
func (p *process) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	requireKilled(t, p)
}

// requireKilled waits for the process and checks that SIGKILL ended it.
func requireKilled(t *testing.T, p *process) {
	t.Helper()
	state := p.wait(t)
	ws, ok := state.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "exit %v, want death by SIGKILL; log:\n%s", state, p.stderr)
}

// send makes one request with a fresh connection (no keep-alive: a
// request must never be silently re-sent to another process).
func send(t *testing.T, method, url, key, body string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer acme:alice")
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp, data, err
}

// mustSend is send that requires a response with the given status.
func mustSend(t *testing.T, status int, method, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	resp, data, err := send(t, method, url, key, body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, "%s %s: %s", method, url, data)
	return resp, data
}

// account reads an account of tenant acme.
func account(t *testing.T, p *process, id string) api.Account {
	t.Helper()
	_, data := mustSend(t, http.StatusOK, "GET", p.url+"/v1/accounts/"+id, "", "")
	var a api.Account
	require.NoError(t, json.Unmarshal(data, &a))
	return a
}
