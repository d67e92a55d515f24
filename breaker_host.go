package idem

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// hostBreaker is the circuit breaker of one host ([BreakerConfig]). gobreaker's
// two-step breaker counts the host's attempts, trips, and judges the
// probes; around it, hostBreaker keeps what gobreaker's fixed Settings
// cannot: the open period of each opening (the server's Retry-After, or a
// period that doubles), the calls waiting for the host, and the pace at
// which they are released when it recovers.
//
// Every call into cb is made holding mu, so that gobreaker's state change
// callback (changed), which runs inside those calls, finds mu held: the
// lock order is mu, then gobreaker's own.
type hostBreaker struct {
	r    *breakers
	name string // scheme://host:port
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]

	mu    sync.Mutex
	state BreakerState // as the Observer last heard it
	// halfOpen: gobreaker went half-open within the open period (an
	// attempt admitted before the breaker opened ended after gobreaker's
	// nanosecond): the change is reported when the period ends.
	halfOpen   bool
	openUntil  time.Time     // the end of the open period; zero when not open
	period     time.Duration // the last open period without Retry-After
	retryAfter time.Duration // the latest Retry-After of a failure since the last change
	waiting    list.List     // of *hostWaiter, oldest first
	window     int           // recovering: the released attempts allowed in flight; 0 when not recovering
	released   int           // recovering: released attempts in flight
	round      uint64        // counts recoveries, so that a ticket of an earlier one is not counted
}

func newHostBreaker(r *breakers, name string) *hostBreaker {
	h := &hostBreaker{r: r, name: name}
	h.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](r.settings(h))
	return h
}

// ticket is an attempt that its host let through; end reports its outcome.
// The zero ticket (no breaker) reports nothing.
type ticket struct {
	h     *hostBreaker
	done  func(error) // gobreaker's
	round uint64      // the recovery that released it, 0 for none
}

// end reports the attempt's outcome to its breaker: nil, errAttemptFailed or
// errAttemptExcluded, with the Retry-After of a failure, and lets the
// waiting calls through that the outcome allows. It must be called exactly
// once per ticket.
func (tk ticket) end(report error, retryAfter time.Duration) {
	h := tk.h
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if report == errAttemptFailed && retryAfter > 0 {
		h.retryAfter = retryAfter // before done, which may open the breaker
	}
	tk.done(report)
	if tk.round != 0 && tk.round == h.round && h.window > 0 {
		h.released--
		h.window++ // it answered (or failed, which the breaker counts): the host keeps pace
	}
	h.dispatch()
}

// hostWaiter is a call waiting for its host.
type hostWaiter struct {
	ready    chan struct{} // a signal to look again: admitted, at the head of the queue, or the host reopened
	admitted bool
	ticket   ticket
}

// waitPolicy is how long a call may wait for a local refusal to pass.
type waitPolicy struct {
	failFast bool
	until    time.Time // the call's deadline or the end of its wait bound, the earlier; zero for none
	bound    string    // what until is: "the context's deadline" or "MaxWait"
	newTimer func(time.Duration) *time.Timer
}

// refusal is why the host did not let an attempt through.
type refusal struct {
	detail string
	cause  error // the context's error when it ended the wait, else nil
}

func (r *refusal) Error() string { return r.detail }

// admit returns a ticket for an attempt to the host, and how long the call
// waited for it; policy, asked only when the attempt cannot go at once,
// says how long it may wait. When the host does not let the attempt through (its
// breaker is open, its probes are taken, or it is releasing the calls that
// waited before this one), admit waits, sending nothing, in a queue of the
// host's waiting calls, oldest first, until it does. It does not wait, and
// returns a *refusal at once, when the call is fail-fast or when the open
// period ends at or after p.until; it stops waiting when ctx ends, p.until
// passes, or the host reopens for longer than p.until allows.
func (h *hostBreaker) admit(ctx context.Context, policy func() waitPolicy) (ticket, time.Duration, error) {
	h.mu.Lock()
	if h.waiting.Len() == 0 {
		if tk, ok := h.try(false); ok {
			h.mu.Unlock()
			return tk, 0, nil
		}
	}
	p := policy()
	now := h.r.now()
	if p.failFast {
		h.mu.Unlock()
		return ticket{}, 0, &refusal{detail: "the host's breaker did not let it through and the call is fail-fast"}
	}
	if err := h.outlasts(now, p); err != nil {
		h.mu.Unlock()
		return ticket{}, 0, err
	}
	start := now
	w := &hostWaiter{ready: make(chan struct{}, 1)}
	e := h.waiting.PushBack(w)
	timer := p.newTimer(time.Hour)
	defer timer.Stop()
	for {
		timerC := h.keepTime(timer, e, now, p.until)
		h.mu.Unlock()
		select {
		case <-w.ready:
		case <-timerC:
		case <-ctx.Done():
		}
		h.mu.Lock()
		now = h.r.now()
		if !w.admitted {
			h.dispatch() // the open period may have ended
		}
		waited := now.Sub(start)
		if w.admitted {
			h.mu.Unlock()
			return w.ticket, waited, nil
		}
		err := h.stopWaiting(ctx, now, p, waited)
		if err != nil {
			h.remove(e)
			h.mu.Unlock()
			return ticket{}, waited, err
		}
	}
}

// outlasts refuses a call that would wait in vain: the host's open period
// ends at or after the end of what the call may wait.
func (h *hostBreaker) outlasts(now time.Time, p waitPolicy) error {
	if p.until.IsZero() || now.Before(p.until) && h.openUntil.Before(p.until) {
		return nil
	}
	if !now.Before(p.until) {
		return &refusal{detail: fmt.Sprintf("the host's breaker did not let it through before %s", p.bound)}
	}
	return &refusal{detail: fmt.Sprintf("the host's breaker is open for %s more, past %s, %s away",
		h.openUntil.Sub(now).Round(time.Millisecond), p.bound, p.until.Sub(now).Round(time.Millisecond))}
}

// stopWaiting returns why a waiting call stops waiting: its context ended,
// or it can no longer be let through in time; nil when it waits on.
func (h *hostBreaker) stopWaiting(ctx context.Context, now time.Time, p waitPolicy, waited time.Duration) error {
	if err := ctx.Err(); err != nil {
		return &refusal{detail: fmt.Sprintf("the call waited %s for the host's breaker and its context ended first",
			waited.Round(time.Millisecond)), cause: err}
	}
	if err := h.outlasts(now, p); err != nil {
		r := err.(*refusal)
		r.detail = fmt.Sprintf("the call waited %s, and %s", waited.Round(time.Millisecond), r.detail)
		return r
	}
	return nil
}

// keepTime arms timer for the next time the waiter at e must look again
// without being told: the end of the open period when it is at the head of
// the queue (it lets the others through then), and until. It returns the
// timer's channel, nil when there is nothing to wait for but a signal.
func (h *hostBreaker) keepTime(timer *time.Timer, e *list.Element, now, until time.Time) <-chan time.Time {
	var next time.Time
	if h.waiting.Front() == e && now.Before(h.openUntil) {
		next = h.openUntil
	}
	if !until.IsZero() && (next.IsZero() || until.Before(next)) {
		next = until
	}
	if next.IsZero() {
		return nil
	}
	timer.Reset(max(next.Sub(now), 0))
	return timer.C
}

// remove takes a waiter that gave up out of the queue, and tells the one
// now at its head, which keeps time for the others.
func (h *hostBreaker) remove(e *list.Element) {
	head := h.waiting.Front() == e
	h.waiting.Remove(e)
	if head {
		h.signalHead()
	}
}

// dispatch lets the waiting calls through, oldest first, while the host
// admits them, and tells the waiter left at the head of the queue when the
// head changed: the head keeps time for the others. When the queue
// empties, a recovery ends: new calls go straight to the breaker again.
func (h *hostBreaker) dispatch() {
	admitted := false
	for e := h.waiting.Front(); e != nil; e = h.waiting.Front() {
		tk, ok := h.try(false)
		if !ok {
			break
		}
		w := h.waiting.Remove(e).(*hostWaiter)
		w.ticket, w.admitted = tk, true
		signal(w)
		admitted = true
	}
	switch {
	case h.waiting.Len() == 0:
		h.window, h.released = 0, 0
	case admitted:
		h.signalHead()
	}
}

func (h *hostBreaker) signalHead() {
	if e := h.waiting.Front(); e != nil {
		signal(e.Value.(*hostWaiter))
	}
}

// signal tells w to look again; a signal already pending is enough.
func signal(w *hostWaiter) {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// try lets one attempt through when the host admits it now: its open
// period is over, a recovery's window has room, and gobreaker allows it
// (closed, or half-open with a probe left). A hedge is let through only
// when the host is closed and no call waits or is being released: it must
// not take a probe's place or a waiting call's. The clock is read only
// when the breaker has opened.
func (h *hostBreaker) try(hedge bool) (ticket, bool) {
	switch {
	case !h.openUntil.IsZero() && h.r.now().Before(h.openUntil):
		return ticket{}, false
	case h.window > 0 && h.released >= h.window:
		return ticket{}, false
	case hedge && (h.state != BreakerClosed || h.window > 0 || h.waiting.Len() > 0):
		return ticket{}, false
	}
	if h.halfOpen {
		h.halfOpen = false
		h.report(gobreaker.StateOpen, gobreaker.StateHalfOpen)
	}
	done, err := h.cb.Allow()
	switch {
	case err == gobreaker.ErrOpenState:
		// gobreaker's own open period (a nanosecond, see settings) has not
		// passed on its clock: look again in a moment.
		h.openUntil = h.r.now().Add(time.Millisecond)
		return ticket{}, false
	case err != nil: // half-open, its probes taken
		return ticket{}, false
	}
	tk := ticket{h: h, done: done}
	if h.window > 0 {
		h.released++
		tk.round = h.round
	}
	return tk, true
}

// hedge returns a ticket for a hedge when the host lets one through now;
// a hedge never waits.
func (h *hostBreaker) hedge() (ticket, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.try(true)
}

// changed follows a state change of gobreaker's, with mu held: an opening
// starts an open period and tells every waiting call (it may not outlast
// the period), a closing with calls waiting starts a recovery.
func (h *hostBreaker) changed(from, to gobreaker.State) {
	if to == gobreaker.StateHalfOpen && !h.openUntil.IsZero() && h.r.now().Before(h.openUntil) {
		h.halfOpen = true // reported when the open period ends (try)
		return
	}
	h.halfOpen = false
	switch to {
	case gobreaker.StateOpen:
		h.openUntil = h.r.now().Add(h.openPeriod(from == gobreaker.StateHalfOpen))
		h.window, h.released = 0, 0
		for e := h.waiting.Front(); e != nil; e = e.Next() {
			signal(e.Value.(*hostWaiter))
		}
	case gobreaker.StateClosed:
		h.openUntil, h.period = time.Time{}, 0
		if h.waiting.Len() > 0 {
			h.round++
			h.window, h.released = int(h.r.cfg.Probes), 0
		}
	}
	h.retryAfter = 0
	h.report(from, to)
}

// report tells the [Observer] of a state change.
func (h *hostBreaker) report(from, to gobreaker.State) {
	h.state = breakerState(to)
	if h.r.onChange != nil {
		h.r.onChange(h.name, breakerState(from), breakerState(to))
	}
}

// openPeriod returns the length of the open period that starts now: the
// Retry-After of the failure that opened the breaker, clamped to
// MaxRetryAfter; else 1 s (or OpenTimeout, when shorter) the first time
// and, when its probes failed (reopen), twice the previous period, up to
// OpenTimeout.
func (h *hostBreaker) openPeriod(reopen bool) time.Duration {
	if ra := min(h.retryAfter, h.r.maxRetryAfter); ra > 0 {
		return ra
	}
	limit := h.r.cfg.OpenTimeout
	if !reopen || h.period == 0 {
		h.period = min(firstOpenPeriod, limit)
	} else {
		h.period = min(2*h.period, limit)
	}
	return h.period
}
