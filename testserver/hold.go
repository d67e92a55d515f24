package testserver

import (
	"context"
	"sync"
	"time"
)

// holdBoard pairs requests held by [FaultHold] with the retries that release
// them.
type holdBoard struct {
	mu   sync.Mutex
	held map[string]*hold
}

// hold is one request held back until a later attempt of its operation
// arrives.
type hold struct {
	attempt      int
	retryFirst   bool
	lag          time.Duration // head start of the first mover
	arrived      chan struct{} // closed by the retry
	heldStarted  chan struct{} // closed when the held request's handler starts
	retryStarted chan struct{} // closed when the retry's handler starts
}

// put registers a held request of op.
func (b *holdBoard) put(op string, attempt int, f Fault) *hold {
	h := &hold{
		attempt: attempt, retryFirst: f.RetryFirst, lag: f.Delay,
		arrived: make(chan struct{}), heldStarted: make(chan struct{}),
		retryStarted: make(chan struct{}),
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		b.held = make(map[string]*hold)
	}
	b.held[op] = h
	return h
}

// take removes and returns the request of op held at an earlier attempt
// than attempt, if any.
func (b *holdBoard) take(op string, attempt int) *hold {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[op]
	if !ok || h.attempt >= attempt {
		return nil
	}
	delete(b.held, op)
	return h
}

// drop forgets h if it is still waiting (its wait timed out).
func (b *holdBoard) drop(op string, h *hold) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[op] == h {
		delete(b.held, op)
	}
}

// arrive is called for every request: when it is the retry that a held
// request waits for, it releases it and orders the two handlers.
func (b *holdBoard) arrive(s *Server, x *exchange) {
	if x.ev.Op == "" {
		return
	}
	h := b.take(x.ev.Op, x.ev.Attempt)
	if h == nil {
		return
	}
	if h.retryFirst {
		x.started = append(x.started, h.retryStarted)
		close(h.arrived)
		return
	}
	close(h.arrived)
	s.follow(x.r.Context(), h.heldStarted, h.lag)
}

// follow waits until the first mover's handler was called (first is
// closed), then lag more. ctx ends the wait early.
func (s *Server) follow(ctx context.Context, first <-chan struct{}, lag time.Duration) error {
	select {
	case <-first:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.sleep(ctx, lag)
}

// holdRequest holds x until a later attempt of its operation arrives (at
// most [Config.HoldTimeout]), then lets it continue with a context that the
// client's disconnect does not cancel but Close still does. It returns
// false when the server closed during the hold.
func (s *Server) holdRequest(x *exchange) bool {
	x.ctx, x.release = detach(s.ctx, x.ctx)
	wait := s.cfg.HoldTimeout
	if x.ev.Op == "" {
		x.ev.Err = "hold: request has no operation id, so no retry can release it"
		return s.sleep(x.ctx, wait) == nil
	}
	h := s.holds.put(x.ev.Op, x.ev.Attempt, x.fault)
	x.started = append(x.started, h.heldStarted)
	timer, stop := s.clock.NewTimer(wait)
	select {
	case <-h.arrived:
		stop()
	case <-timer:
		s.holds.drop(x.ev.Op, h)
		x.ev.Err = "hold: no retry arrived within " + wait.String()
		return true
	case <-x.ctx.Done():
		stop()
		s.holds.drop(x.ev.Op, h)
		x.ev.Err = "hold: server closed"
		return false
	}
	if h.retryFirst && s.follow(x.ctx, h.retryStarted, h.lag) != nil {
		x.ev.Err = "hold: server closed"
		return false
	}
	return true
}

// detach returns a context with ctx's values that ends only when the
// server's context does, and a function that releases it.
func detach(server, ctx context.Context) (context.Context, func()) {
	d, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(server, cancel)
	return d, func() { stop(); cancel() }
}
