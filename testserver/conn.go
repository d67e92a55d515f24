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

// attemptCounter numbers the requests of each operation.
type attemptCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// next returns the attempt number of a new request of op: 1, 2, ...; a
// request without an operation id is always attempt 1.
func (a *attemptCounter) next(op string) int {
	if op == "" {
		return 1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = make(map[string]int)
	}
	a.n[op]++
	return a.n[op]
}

// discardLog is the http.Server error log: a fault injector causes the
// errors that net/http would print (broken pipes, hijacked writes).
func discardLog() *log.Logger {
	return log.New(io.Discard, "", 0)
}
