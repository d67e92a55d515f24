package testserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server is an HTTP/1.1 server on a loopback port that applies fault rules
// to every request before passing it to a handler ([New]) or to upstream
// servers ([NewProxy]), and logs an [Event] for each. It is safe for
// concurrent use; Close releases everything it holds.
type Server struct {
	// URL is the base URL of the server, "http://127.0.0.1:port", without
	// a trailing slash.
	URL string

	cfg     Config // resolved (withDefaults)
	handler http.Handler
	proxy   *proxy // nil for New
	clock   clock

	ln     net.Listener
	srv    *http.Server
	ctx    context.Context // cancelled by Close; parent of every request's
	cancel context.CancelFunc

	rules    atomic.Pointer[ruleSet]
	index    atomic.Int64
	connID   atomic.Uint64
	attempts attemptCounter
	holds    holdBoard
	log      *eventLog

	mu       sync.Mutex
	closed   bool
	hijacked map[net.Conn]struct{}
	inflight sync.WaitGroup
	done     chan struct{} // closed when Serve returns
}

// New starts a [Server] that runs handler behind the configured faults, like
// httptest.NewServer. It panics, as httptest does, when it cannot listen or
// cfg is invalid (a bad rule, a non-loopback Addr): both are bugs in the
// test that calls it.
func New(handler http.Handler, cfg Config) *Server {
	s, err := start(handler, nil, cfg, realClock{})
	if err != nil {
		panic(err)
	}
	return s
}

// NewProxy starts a [Server] that forwards each request to one of upstreams
// (absolute http or https URLs; several are used in turn, round-robin),
// behind the configured faults. The upstream's response is buffered when a
// fault needs it (those that act after the handler), streamed otherwise.
// It returns an error for a bad upstream URL, a bad [Config] or a failed
// listen.
func NewProxy(upstreams []string, cfg Config) (*Server, error) {
	p, err := newProxy(upstreams)
	if err != nil {
		return nil, err
	}
	return start(p, p, cfg, realClock{})
}

// start validates cfg, resolves its defaults, listens and serves.
func start(handler http.Handler, p *proxy, cfg Config, clk clock) (*Server, error) {
	if handler == nil {
		return nil, errors.New("testserver: nil handler")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ln, err := cfg.listen()
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL:      "http://" + ln.Addr().String(),
		cfg:      cfg,
		handler:  handler,
		proxy:    p,
		clock:    clk,
		ln:       ln,
		log:      newEventLog(cfg.MaxEvents),
		hijacked: make(map[net.Conn]struct{}),
		done:     make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.rules.Store(newRuleSet(cfg.Rules, clk.Now()))
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: time.Minute,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ConnContext:       s.connContext,
		ErrorLog:          discardLog(),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
}

// SetRules replaces the rules, atomically: every request is decided by the
// old rules or by the new ones, never a mix. Time windows ([Match.From],
// [Match.Until]) restart from now. It returns an error, and changes nothing,
// when a rule is invalid.
func (s *Server) SetRules(rules []Rule) error {
	if err := ValidateRules(rules); err != nil {
		return err
	}
	s.rules.Store(newRuleSet(rules, s.clock.Now()))
	return nil
}

// Events returns a copy of the events logged so far (the latest
// [Config.MaxEvents] when set), in the order requests finished.
func (s *Server) Events() []Event {
	return s.log.snapshot()
}

// WaitEvents blocks until n events have been logged in all, then returns
// Events(). ctx bounds the wait: when it ends first, WaitEvents returns the
// events so far and ctx.Err(). Use it to see the server's side of a request
// whose client already returned (a drop or a hang ends on the server after
// the client has given up).
func (s *Server) WaitEvents(ctx context.Context, n int) ([]Event, error) {
	return s.log.wait(ctx, n)
}

// Close stops the server: it stops listening, ends every wait (delays,
// blackholes, hangs, holds), closes every connection, including the
// hijacked ones, and waits for the requests in progress to return (a
// handler that blocks forever blocks Close, as with httptest). It is safe
// to call more than once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for c := range s.hijacked {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	_ = s.srv.Close()
	s.inflight.Wait()
	<-s.done
	if s.proxy != nil {
		s.proxy.close()
	}
}

// enter registers a request in progress; false when the server is closed.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}
