package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/gobuild"
	"github.com/idemkit/idem/testserver"
)

// buildProxy compiles the program into a temporary directory.
func buildProxy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "faultproxy")
	if err := gobuild.Build(".", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// proxyProcess is a running faultproxy with its output.
type proxyProcess struct {
	cmd    *exec.Cmd
	url    string
	lines  chan string // stdout lines after the first
	stderr chan string
}

func startProxy(t *testing.T, bin string, args ...string) *proxyProcess {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return startCmd(t, exec.CommandContext(ctx, bin, args...), 10*time.Second)
}

// startCmd starts cmd, a faultproxy, and waits up to within for its
// first line.
func startCmd(t *testing.T, cmd *exec.Cmd, within time.Duration) *proxyProcess {
	t.Helper()
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &proxyProcess{cmd: cmd, lines: lineChan(stdout), stderr: lineChan(stderr)}
	first := p.nextWithin(t, p.lines, within)
	var seed, rules int
	if _, err := fmt.Sscanf(first, "faultproxy: listening on %s (seed %d, %d rules)", &p.url, &seed, &rules); err != nil {
		t.Fatalf("first line %q: %v", first, err)
	}
	return p
}

func lineChan(r io.Reader) chan string {
	c := make(chan string, 100)
	go func() {
		defer close(c)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			c <- sc.Text()
		}
	}()
	return c
}

// next returns the next line of c, failing after 10s.
func (p *proxyProcess) next(t *testing.T, c chan string) string {
	t.Helper()
	return p.nextWithin(t, c, 10*time.Second)
}

// nextWithin returns the next line of c, failing after d.
func (p *proxyProcess) nextWithin(t *testing.T, c chan string, d time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-c:
		if !ok {
			t.Fatal("faultproxy output ended")
		}
		return line
	case <-time.After(d):
		t.Fatalf("no output from faultproxy within %s", d)
	}
	return ""
}

// stopsOn sends sig to the process group of p (its own pid when group is
// false) and checks that the proxy prints its summary, exits (with 0 when
// p is the program itself) and no longer listens.
func (p *proxyProcess) stopsOn(t *testing.T, sig syscall.Signal, group bool) {
	t.Helper()
	pid := p.cmd.Process.Pid
	if group {
		pid = -pid
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("kill(%d, %v): %v", pid, sig, err)
	}
	if line := p.nextWithin(t, p.stderr, 30*time.Second); !strings.HasPrefix(line, "requests: 0 for 0 operations") {
		t.Fatalf("after %v: %q, want the summary", sig, line)
	}
	err := p.cmd.Wait()
	switch {
	case group:
		// go run's own status: it exits 1 when interrupted, whatever the
		// program's (cmd/go's builder sets it on the interrupt).
	case err != nil:
		t.Fatalf("exit after %v: %v, want 0", sig, err)
	}
	if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(p.url, "http://"), time.Second); err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after %v", p.url, sig)
	}
}

// SIGINT and SIGTERM stop the program: it prints its summary and exits 0.
func TestFaultproxyStopsOnSignals(t *testing.T) {
	bin := buildProxy(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			startProxy(t, bin, "-listen", "127.0.0.1:0", "-upstream", "http://127.0.0.1:1").stopsOn(t, sig, false)
		})
	}
}

// Under go run, the program is a child of the go command, which neither
// passes on a signal sent to its own pid nor stops the child: a SIGINT
// must reach the program, as Ctrl-C at a terminal or kill -INT %1 (a
// job's process group) send it. Then the program stops, and go run
// exits.
func TestFaultproxyUnderGoRunStopsOnInterruptOfItsGroup(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "run", ".", "-listen", "127.0.0.1:0", "-upstream", "http://127.0.0.1:1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a job of its own, as a shell with job control runs it
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	startCmd(t, cmd, 2*time.Minute).stopsOn(t, syscall.SIGINT, true)
}

func (p *proxyProcess) event(t *testing.T) testserver.Event {
	t.Helper()
	var e testserver.Event
	line := p.next(t, p.lines)
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatalf("event line %q: %v", line, err)
	}
	return e
}

func post(url, key string) (*http.Response, error) {
	return postWith(url, "Idempotency-Key", key)
}

// postWith posts a payment with key in the header named header.
func postWith(url, header, key string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/payments", strings.NewReader(`{"amount":100}`))
	req.Header.Set(header, key)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func TestFaultproxyDropsAfterTheUpstreamActed(t *testing.T) {
	var acted atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acted.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"pay-1"}`)
	}))
	defer upstream.Close()
	rulesFile := filepath.Join(t.TempDir(), "rules.json")
	writeFile(t, rulesFile, `{"rules": [{"name": "lose-first", "match": {"method": "POST"}, "script": ["drop-close"]}]}`)

	p := startProxy(t, buildProxy(t), "-listen", "127.0.0.1:0", "-upstream", upstream.URL, "-rules", rulesFile, "-log")

	_, err := post(p.url, "key-1")
	if !errors.Is(err, io.EOF) {
		t.Fatalf("first attempt: error %v, want EOF (the response was dropped)", err)
	}
	if n := acted.Load(); n != 1 {
		t.Fatalf("upstream acted %d times, want 1: the drop came after it answered", n)
	}
	if e := p.event(t); e.Fault.Kind != testserver.FaultDropClose || !e.HandlerRan || e.HandlerStatus != 201 || e.Attempt != 1 || e.Upstream != upstream.URL {
		t.Fatalf("event of attempt 1 = %+v", e)
	}
	if resp, err := post(p.url, "key-1"); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("retry: %v, %v; want 201", resp, err)
	}
	if e := p.event(t); e.Fault.Kind != testserver.FaultNone || e.Attempt != 2 || e.Status != 201 {
		t.Fatalf("event of attempt 2 = %+v", e)
	}

	// SIGHUP reloads the rules file.
	writeFile(t, rulesFile, `{"rules": [{"mix": [{"p": 1, "fault": "status;status=503;retry-after=7"}]}]}`)
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	if line := p.next(t, p.stderr); line != "faultproxy: reloaded 1 rules" {
		t.Fatalf("after SIGHUP: %q", line)
	}
	if resp, err := post(p.url, "key-2"); err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("after reload: %v, %v; want 503 with Retry-After 7", resp, err)
	}
	if n := acted.Load(); n != 2 {
		t.Fatalf("upstream acted %d times, want 2 (the 503 came before it)", n)
	}

	_ = p.cmd.Process.Signal(os.Interrupt)
	if line := p.next(t, p.stderr); !strings.HasPrefix(line, "requests: 3 for 2 operations") {
		t.Fatalf("summary line %q, want the request count", line)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit: %v, want 0", err)
	}
}

// -key-header names the header that carries the key: requests with the
// same X-Idempotency-Key are attempts of one operation, and the event
// shows the key.
func TestFaultproxyKeyHeader(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	defer upstream.Close()
	p := startProxy(t, buildProxy(t), "-listen", "127.0.0.1:0", "-upstream", upstream.URL,
		"-key-header", "X-Idempotency-Key", "-log")
	for attempt := 1; attempt <= 2; attempt++ {
		resp, err := postWith(p.url, "X-Idempotency-Key", "key-7")
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("attempt %d: %v, %v; want 201", attempt, resp, err)
		}
		if e := p.event(t); e.Key != "key-7" || e.Attempt != attempt {
			t.Fatalf("event %d = key %q, attempt %d; want key-7, %d", attempt, e.Key, e.Attempt, attempt)
		}
	}
}

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	writeFile(t, bad, `{"rules": [{"script": ["explode"]}]}`)
	cases := map[string][]string{
		"no upstream":    {"-listen", "127.0.0.1:0"},
		"bad fault":      {"-upstream", "http://127.0.0.1:1", "-fault", "explode"},
		"bad p":          {"-upstream", "http://127.0.0.1:1", "-fault", "reset", "-p", "2"},
		"bad seed":       {"-upstream", "http://127.0.0.1:1", "-seed", "x"},
		"not loopback":   {"-upstream", "http://127.0.0.1:1", "-listen", "0.0.0.0:0"},
		"bad rules":      {"-upstream", "http://127.0.0.1:1", "-rules", bad},
		"missing rules":  {"-upstream", "http://127.0.0.1:1", "-rules", bad + ".missing"},
		"bad upstream":   {"-upstream", "127.0.0.1:1"},
		"unknown flag":   {"-upstream", "http://127.0.0.1:1", "-colour"},
		"extra argument": {"-upstream", "http://127.0.0.1:1", "now"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if err := run(args, &stdout, &stderr, nil); err == nil {
				t.Fatalf("run(%q) = nil, want an error", args)
			}
			if stdout.Len() != 0 {
				t.Fatalf("run(%q) printed %q on stdout, want nothing", args, stdout.String())
			}
		})
	}
}
