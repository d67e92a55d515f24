//go:build unix

package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/gobuild"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/testserver"
)

// rescueAfter is the dispatchers' RescueAfter in the process tests: a
// killed dispatcher's message is delivered again within it plus about a
// minute (River's rescuer runs every 30 s on the leader; a dead leader is
// replaced within 20 s).
const rescueAfter = 5 * time.Second

// dispatcherArgs are the dispatcher program's flags in the process tests:
// no per-attempt timeout, so that a held request stays one attempt until
// its dispatcher dies.
func dispatcherArgs(dbURL, name string) []string {
	return []string{"-db", dbURL, "-name", name, "-timeout", "3s", "-rescue-after", rescueAfter.String(),
		"-poll", "50ms", "-min-backoff", "10ms", "-max-backoff", "200ms", "-attempt-timeout", "0", "-workers", "20"}
}

// dispatcherProc is a running dispatcher program.
type dispatcherProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it exited
}

// startDispatcher starts the dispatcher program; it is stopped (SIGTERM,
// then SIGKILL) when the test ends.
func startDispatcher(t *testing.T, bin, dbURL, name string, log *os.File) *dispatcherProc {
	t.Helper()
	cmd := exec.Command(bin, dispatcherArgs(dbURL, name)...)
	cmd.Env = append(os.Environ(), traceChild(t))
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	p := &dispatcherProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// kill SIGKILLs the dispatcher and waits until it is gone.
func (p *dispatcherProc) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
	require.Equal(t, syscall.SIGKILL, p.cmd.ProcessState.Sys().(syscall.WaitStatus).Signal())
}

// holdFirst is a handler in front of the Receiver that counts deliveries
// per dispatcher, checks that no key is delivered by two requests at once,
// and holds the first request of one key until released; the held request
// then goes on with a context that its client's death does not cancel, so
// that the Receiver records it although nobody hears the answer.
type holdFirst struct {
	next    http.Handler
	key     string
	held    chan string // the name of the dispatcher that sent the held request
	release chan struct{}

	mu       sync.Mutex
	seen     map[string]int // requests per key
	inFlight map[string]int
	overlaps []string       // keys delivered twice at once
	by       map[string]int // requests per dispatcher
}

func newHoldFirst(key string) *holdFirst {
	return &holdFirst{key: key, held: make(chan string, 1), release: make(chan struct{}),
		seen: map[string]int{}, inFlight: map[string]int{}, by: map[string]int{}}
}

func (h *holdFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(wire.HeaderKey)
	h.mu.Lock()
	h.seen[key]++
	h.inFlight[key]++
	h.by[r.Header.Get("X-Dispatcher")]++
	if h.inFlight[key] > 1 {
		h.overlaps = append(h.overlaps, key)
	}
	first := h.seen[key] == 1
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inFlight[key]--
		h.mu.Unlock()
	}()
	if key == h.key && first {
		h.held <- r.Header.Get("X-Dispatcher")
		<-h.release
		r = r.WithContext(context.WithoutCancel(r.Context()))
	}
	h.next.ServeHTTP(w, r)
}

func (h *holdFirst) requests(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[key]
}

// TestOutboxDispatcherKilled: two dispatcher processes deliver 300
// notifications at once. One of them is SIGKILLed while the Receiver
// holds its delivery of one notification; the held request then completes
// (the Receiver records it; the dead dispatcher never hears). The killed
// dispatcher is restarted. The abandoned message is delivered again with
// the same key within the documented bound (the Receiver replays its
// stored 201), and the Receiver's records show every notification exactly
// once; no message was ever delivered by two requests at once.
func TestOutboxDispatcherKilled(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dispatcher")
	require.NoError(t, gobuild.BuildIn(filepath.Join("..", "examples", "payments", "dispatcher"), ".", bin))
	const n = 300
	target := notificationKey(n / 6)
	var hold *holdFirst
	rig := newOutboxRig(t, pgtest.SchemaURL(t), testserver.Config{}, api.ReceiverConfig{})
	hold = newHoldFirst(target)
	hold.next = rig.receiver
	holder := testserver.New(hold, testserver.Config{})
	t.Cleanup(holder.Close)
	rig.srv = holder // the dispatchers deliver through the holder

	ob, err := outbox.New(rig.pool, outbox.Config{RescueAfter: rescueAfter, Timeout: 3 * time.Second})
	require.NoError(t, err)
	log, err := os.Create(filepath.Join(t.TempDir(), "dispatchers.log"))
	require.NoError(t, err)
	defer log.Close()
	procs := map[string]*dispatcherProc{
		"a": startDispatcher(t, bin, rig.url, "a", log),
		"b": startDispatcher(t, bin, rig.url, "b", log),
	}
	ids := rig.enqueue(t, ob, 0, n)

	var victim string
	select {
	case victim = <-hold.held:
	case <-time.After(60 * time.Second):
		t.Fatalf("the target was not delivered within 60 s; log:\n%s", tail(log))
	}
	killedAt := time.Now()
	procs[victim].kill(t)
	close(hold.release)
	procs[victim] = startDispatcher(t, bin, rig.url, victim, log)

	rig.waitNotified(t, n, 60*time.Second)
	deadline := killedAt.Add(rescueAfter + 90*time.Second)
	for hold.requests(target) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling the holder, not testing time
	}
	require.GreaterOrEqual(t, hold.requests(target), 2, "the abandoned message was not delivered again; log:\n%s", tail(log))
	rig.requireExactlyOnce(t, ids)
	hold.mu.Lock()
	defer hold.mu.Unlock()
	t.Logf("dispatcher %s killed mid-delivery; delivered again after %s; deliveries by dispatcher: %v",
		victim, time.Since(killedAt).Round(100*time.Millisecond), hold.by)
	require.Empty(t, hold.overlaps, "keys delivered by two requests at once")
	require.NotZero(t, hold.by["a"], "dispatcher a delivered nothing")
	require.NotZero(t, hold.by["b"], "dispatcher b delivered nothing")
}

// tail returns the end of a log file.
func tail(f *os.File) string {
	b, _ := os.ReadFile(f.Name())
	if i := len(b) - 4000; i > 0 {
		b = b[i:]
	}
	return string(bytes.TrimSpace(b))
}
