package testserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// finDrain bounds how long a connection closed with FIN is drained for the
// client's own close, so that unread request bytes do not turn the FIN
// into an RST.
const finDrain = 5 * time.Second

// connInfo is attached to each accepted connection's context.
type connInfo struct {
	id       uint64
	requests atomic.Int64
}

type connKey struct{}

func (s *Server) connContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &connInfo{id: s.connID.Add(1)})
}

// connOf returns the connection id of r and whether r is not its first
// request.
func connOf(r *http.Request) (id uint64, reused bool) {
	ci, ok := r.Context().Value(connKey{}).(*connInfo)
	if !ok {
		return 0, false
	}
	return ci.id, ci.requests.Add(1) > 1
}

// errClosed is returned by hijack when the server is closing.
var errClosed = errors.New("testserver: server closed")

// hijack takes the connection of w over from net/http and tracks it so that
// Close can close it.
func (s *Server) hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return nil, nil, errClosed
	}
	s.hijacked[c] = struct{}{}
	return c, brw, nil
}

// release closes a hijacked connection and forgets it.
func (s *Server) release(c net.Conn) {
	s.mu.Lock()
	delete(s.hijacked, c)
	s.mu.Unlock()
	_ = c.Close()
}

// resetConn closes c with a TCP RST: no lingering, so unsent data is
// discarded and the peer's next read fails with ECONNRESET.
func (s *Server) resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	s.release(c)
}

// finConn closes c with a FIN: it shuts down the write side, then reads
// until the client closes (bounded by finDrain and by Close), so that
// unread request bytes in the kernel do not turn the close into an RST.
func (s *Server) finConn(c net.Conn, r io.Reader) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(finDrain))
	_, _ = io.Copy(io.Discard, r)
	s.release(c)
}

// hangConn keeps c open and silent until the client closes it or the
// server closes, discarding whatever the client sends.
func (s *Server) hangConn(c net.Conn, r io.Reader) {
	_, _ = io.Copy(io.Discard, r)
	s.release(c)
}

// attemptMemory is how long the server remembers an operation id after
// its latest request: a request of an operation idle for longer starts
// again at attempt 1. It keeps the attempt counter of a long-running proxy
// to the operations seen recently, while every retry schedule worth
// testing fits in it many times over.
const attemptMemory = time.Hour

// minSweep is the number of remembered operations below which the attempt
// counter does not look for idle ones.
const minSweep = 1024

// attemptCounter numbers the requests of each operation.
type attemptCounter struct {
	mu      sync.Mutex
	ops     map[string]opAttempts
	sweepAt int // len(ops) at which the idle operations are forgotten
}

// opAttempts is what the counter remembers of one operation.
type opAttempts struct {
	n    int       // requests so far
	last time.Time // arrival of the latest
}

// next returns the attempt number of a new request of op that arrived at
// now: 1, 2, ..., starting again at 1 after attemptMemory without a
// request of op; a request without an operation id is always attempt 1.
func (a *attemptCounter) next(op string, now time.Time) int {
	if op == "" {
		return 1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ops == nil {
		a.ops = make(map[string]opAttempts)
	}
	o := a.ops[op]
	if now.Sub(o.last) > attemptMemory {
		o.n = 0
	}
	o.n++
	o.last = now
	a.ops[op] = o
	if len(a.ops) >= a.sweepAt {
		a.forget(now)
	}
	return o.n
}

// forget drops the operations idle for longer than attemptMemory, into a
// new map so that the memory goes too. The next sweep comes when the
// operations kept have doubled, so that sweeping costs O(1) per request
// amortised. Called with a.mu held.
func (a *attemptCounter) forget(now time.Time) {
	kept := make(map[string]opAttempts, len(a.ops))
	for op, o := range a.ops {
		if now.Sub(o.last) <= attemptMemory {
			kept[op] = o
		}
	}
	a.ops = kept
	a.sweepAt = max(2*len(kept), minSweep)
}

// discardLog is the http.Server error log: a fault injector causes the
// errors that net/http would print (broken pipes, hijacked writes).
func discardLog() *log.Logger {
	return log.New(io.Discard, "", 0)
}
