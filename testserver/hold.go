package testserver

import (
	"context"
	"sync"
)

// holdBoard pairs requests held by FaultHold with the retries that release
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
	arrived      chan struct{} // closed by the retry
	heldStarted  chan struct{} // closed when the held request's handler starts
	retryStarted chan struct{} // closed when the retry's handler starts
}

// put registers a held request of op.
func (b *holdBoard) put(op string, attempt int, retryFirst bool) *hold {
	h := &hold{
		attempt: attempt, retryFirst: retryFirst,
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
	select { // the held request goes first: wait until its handler started
	case <-h.heldStarted:
	case <-x.r.Context().Done():
	}
}

// holdRequest holds x until a later attempt of its operation arrives (at
// most f.holdFor()), then lets it continue with a context that the
// client's disconnect does not cancel but Close still does. It returns
// false when the server closed during the hold.
func (s *Server) holdRequest(x *exchange, f Fault) bool {
	x.ctx = detach(s.ctx, x.ctx)
	if x.ev.Op == "" {
		x.ev.Err = "hold: request has no operation id, so no retry can release it"
		err := s.sleep(x.ctx, f.holdFor())
		return err == nil
	}
	h := s.holds.put(x.ev.Op, x.ev.Attempt, f.RetryFirst)
	x.started = append(x.started, h.heldStarted)
	timer, stop := s.clock.NewTimer(f.holdFor())
	defer stop()
	select {
	case <-h.arrived:
	case <-timer:
		s.holds.drop(x.ev.Op, h)
		x.ev.Err = "hold: no retry arrived within " + f.holdFor().String()
		return true
	case <-x.ctx.Done():
		s.holds.drop(x.ev.Op, h)
		x.ev.Err = "hold: server closed"
		return false
	}
	if h.retryFirst {
		select {
		case <-h.retryStarted:
		case <-x.ctx.Done():
			x.ev.Err = "hold: server closed"
			return false
		}
	}
	return true
}

// detach returns a context with ctx's values that ends only when the
// server's context does.
func detach(server, ctx context.Context) context.Context {
	d, cancel := context.WithCancel(context.WithoutCancel(ctx))
	context.AfterFunc(server, cancel)
	return d
}
