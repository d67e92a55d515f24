//go:build unix

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/gobuild"
)

// buildServerProgram compiles examples/payments/server into a temporary
// directory of t and returns the binary's path.
func buildServerProgram(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "payments-server")
	require.NoError(t, gobuild.BuildIn(filepath.Join("..", "examples", "payments", "server"), ".", bin))
	return bin
}

// freeAddr returns a loopback address with a port that was free a moment
// ago: the fixed address of a server and its restarts.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// listenTimeout bounds how long a server program may take to listen.
const listenTimeout = 30 * time.Second

// supervisor runs the server program as a child process and, each time
// the child exits, restarts it without the crash switch, on the same
// address and database, as a service manager would. It keeps how each
// child ended. It is safe for concurrent use.
type supervisor struct {
	bin  string
	args []string
	log  *os.File // every child's stderr, and the supervisor's notes

	mu       sync.Mutex
	child    *exec.Cmd
	exits    []*os.ProcessState
	failure  error // why a restart failed, nil when none did
	stopping bool
	done     chan struct{} // closed when the supervision loop ended
	traceEnv string        // trace.EnvFile for every child (traceChild)
}

// supervise starts the program with args and the environment env
// (KEY=value, added to the test's), waits until it listens, and supervises
// it until the test ends. Every child records its lifecycle steps
// (traceChild), checked when the test ends.
func supervise(t *testing.T, bin string, env []string, args ...string) *supervisor {
	t.Helper()
	return superviseTraced(t, bin, traceChild(t), env, args...)
}

// superviseTraced is supervise with the children's trace.EnvFile entry
// traceEnv ("": a program that records no step, such as a test's script).
func superviseTraced(t *testing.T, bin, traceEnv string, env []string, args ...string) *supervisor {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	s := &supervisor{bin: bin, args: args, log: log, done: make(chan struct{}), traceEnv: traceEnv}
	first, listening, drained := s.start(env)
	if first != nil { // killed even if it never listens (then no loop waits for it)
		t.Cleanup(func() { _ = first.Process.Kill() })
	}
	select {
	case err := <-listening:
		require.NoError(t, err, "the server program did not start; log:\n%s", s.logTail())
	case <-time.After(listenTimeout):
		t.Fatalf("the server program did not listen within %s; log:\n%s", listenTimeout, s.logTail())
	}
	go s.loop(first, drained)
	t.Cleanup(s.stop)
	return s
}

// maxRestarts bounds the restarts: a child that keeps dying is a failure
// to report, not to retry forever.
const maxRestarts = 3

// start starts a child; listening reports when it printed its listening
// line, or why it did not, and drained is closed when its stdout has been
// read to the end (Wait closes the pipe, so it must come after).
func (s *supervisor) start(env []string) (child *exec.Cmd, listening <-chan error, drained <-chan struct{}) {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = append(os.Environ(), env...)
	if s.traceEnv != "" {
		cmd.Env = append(cmd.Env, s.traceEnv) // every child, restarts too, records its steps
	}
	cmd.Stderr = s.log
	listened, done := make(chan error, 1), make(chan struct{})
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		listened <- err
		return nil, listened, done
	}
	go func() {
		defer close(done)
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && !strings.HasPrefix(line, "payments server: listening on ") {
			err = fmt.Errorf("first line %q, want the listening line", line)
		}
		listened <- err
		_, _ = io.Copy(io.Discard, stdout)
	}()
	s.mu.Lock()
	s.child = cmd
	if s.stopping { // stop ran after loop decided to restart: it signalled the old child
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	s.mu.Unlock()
	return cmd, listened, done
}

// loop waits for each child to exit and restarts it, until stop.
func (s *supervisor) loop(child *exec.Cmd, drained <-chan struct{}) {
	defer close(s.done)
	for child != nil {
		<-drained
		_ = child.Wait()
		s.mu.Lock()
		if s.stopping { // the exit is stop's kill
			s.mu.Unlock()
			return
		}
		s.exits = append(s.exits, child.ProcessState)
		again := len(s.exits) <= maxRestarts
		s.mu.Unlock()
		if !again {
			return
		}
		fmt.Fprintf(s.log, "supervisor: the child exited (%v); restarting it without the crash switch\n", child.ProcessState)
		var listening <-chan error
		child, listening, drained = s.start(nil) // the clients retry until it listens
		if child == nil {
			s.fail(<-listening)
			return
		}
	}
}

// fail notes and logs why a restart failed: the supervision ends, and
// failed reports it.
func (s *supervisor) fail(err error) {
	err = fmt.Errorf("supervisor: cannot restart the child: %w", err)
	fmt.Fprintln(s.log, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure = err
}

// failed returns why a restart failed, nil when none did.
func (s *supervisor) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// stop kills the child and ends the supervision. It is safe to call more
// than once.
func (s *supervisor) stop() {
	s.mu.Lock()
	s.stopping = true
	if s.child != nil {
		_ = s.child.Process.Signal(syscall.SIGKILL) // an error: it has exited already
	}
	s.mu.Unlock()
	<-s.done
}

// exited returns how each child that exited by itself (not by stop) ended.
func (s *supervisor) exited() []*os.ProcessState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*os.ProcessState(nil), s.exits...)
}

// killedBySIGKILL reports whether a process ended by SIGKILL.
func killedBySIGKILL(state *os.ProcessState) bool {
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// logText returns the children's log.
func (s *supervisor) logText() string {
	data, err := os.ReadFile(s.log.Name())
	if err != nil {
		return fmt.Sprintf("(the log cannot be read: %v)", err)
	}
	return string(data)
}

// logTail returns the last 8 KiB of the children's log, for failure
// messages.
func (s *supervisor) logTail() string {
	text := s.logText()
	return text[max(0, len(text)-8<<10):]
}

// A restart that fails ends the supervision, and the supervisor says why,
// in failed and in the log. The child is a script that listens (prints the
// line) and exits when the test writes to its fifo; by then its program is
// gone, so the restart cannot start it.
func TestSupervisorReportsARestartFailure(t *testing.T) {
	dir := t.TempDir()
	bin, fifo := filepath.Join(dir, "server"), filepath.Join(dir, "exit")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	script := "#!/bin/sh\necho 'payments server: listening on http://127.0.0.1:1'\nread _ < '" + fifo + "'\nexit 3\n"
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o700))
	s := superviseTraced(t, bin, "", nil) // a script: it records no lifecycle step

	require.NoError(t, os.Remove(bin))
	go func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil { // waits for the child to open it
			_ = w.Close() // the child reads EOF and exits
		}
	}()
	select {
	case <-s.done:
	case <-time.After(listenTimeout):
		t.Fatalf("the supervision did not end within %s; log:\n%s", listenTimeout, s.logTail())
	}
	require.Error(t, s.failed(), "log:\n%s", s.logTail())
	assert.ErrorIs(t, s.failed(), os.ErrNotExist)
	assert.Contains(t, s.logText(), "supervisor: cannot restart the child: ")
	assert.Len(t, s.exited(), 1, "the script's exit")
}
