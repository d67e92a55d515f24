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
	probeLimit time.Duration // bounds each probe of the current opening
	// slowProbe is the limit of the latest probe, when it failed by
	// running into it: the next opening doubles it (probeBound).
	slowProbe time.Duration
	// answer is how long the latest probe or released attempt that
	// succeeded took: a call whose deadline comes sooner than that after
	// the open period cannot be answered in time. Zero before the first.
	answer  time.Duration
	waiting waitQueue[ticket]
	window  int // recovering: the released attempts allowed in flight; 0 when not recovering
	// threshold: recovering, the window at which it grows by one per
	// window of successes rather than one per success; 0 before a failure.
	threshold int
	acks      int    // successes since the window last grew, past threshold
	released  int    // recovering: released attempts in flight
	round     uint64 // counts recoveries, so that a ticket of an earlier one is not counted
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
	// limit bounds a probe's attempt (see [BreakerConfig]): past it the
	// attempt fails, and counts; zero for an attempt that is not a probe.
	limit time.Duration
	start time.Time // when a probe or a released attempt was let through, zero for others
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
	switch {
	case !tk.start.IsZero() && report == nil:
		h.answer = h.r.now().Sub(tk.start)
	case tk.limit > 0 && report == errAttemptFailed && h.r.now().Sub(tk.start) >= tk.limit:
		h.slowProbe = tk.limit // before done, which opens the breaker again
	}
	tk.done(report)
	if tk.round != 0 && tk.round == h.round && h.window > 0 {
		h.released--
		h.pace(report)
	}
	h.dispatch()
}

// pace adjusts a recovery's window to the outcome of a released attempt,
// as TCP's congestion window: one more for a success (the host keeps
// pace, and the window doubles every round trip) until a failure (the host
// is saturated again: a queue full, a timeout) halves it; from then on, one
// more per window of successes (one per round trip). An attempt that says
// nothing of the host changes nothing.
func (h *hostBreaker) pace(report error) {
	switch {
	case report == errAttemptFailed:
		h.window = max(1, h.window/2)
		h.threshold, h.acks = h.window, 0
	case report != nil:
	case h.threshold == 0 || h.window < h.threshold:
		h.window++
	default:
		if h.acks++; h.acks >= h.window {
			h.window++
			h.acks = 0
		}
	}
}

// admit returns a ticket for an attempt to the host, and how long the call
// waited for it; policy, asked only when the attempt cannot go at once,
// says how long it may wait. When the host does not let the attempt through (its
// breaker is open, its probes are taken, or it is releasing the calls that
// waited before this one), admit waits, sending nothing, in a queue of the
// host's waiting calls, oldest first, until it does. It does not wait, and
// returns a *refusal at once, when the call is fail-fast, when the open
// period ends at or after p.until, or when its deadline comes before the
// host could answer it (tooLate); it stops waiting when ctx ends, p.until
// passes, the host reopens for longer than p.until allows, or the call can
// no longer be answered in time.
func (h *hostBreaker) admit(ctx context.Context, policy func() waitPolicy) (ticket, time.Duration, *refusal) {
	h.mu.Lock()
	if h.waiting.len() == 0 {
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
	if r := h.outlasts(now, p); r != nil {
		h.mu.Unlock()
		return ticket{}, 0, r
	}
	start := now
	w := newWaiter[ticket](p.deadline)
	e := h.waiting.push(w)
	timer := p.newTimer(time.Hour)
	defer timer.Stop()
	for {
		w.park(ctx, &h.mu, h.keepTime(timer, e, now, p))
		now = h.r.now()
		if !w.done {
			h.dispatch() // the open period may have ended
		}
		waited := now.Sub(start)
		if w.done {
			h.mu.Unlock()
			if r := w.refused; r != nil {
				r.detail = fmt.Sprintf("the call waited %s, and %s", waited.Round(time.Millisecond), r.detail)
				return ticket{}, waited, r
			}
			return w.value, waited, nil
		}
		if r := h.stopWaiting(ctx, now, p, waited); r != nil {
			h.remove(e)
			h.mu.Unlock()
			return ticket{}, waited, r
		}
	}
}

// outlasts refuses a call that would wait in vain: the host's open period
// ends at or after the end of what the call may wait, or its deadline
// comes before the host could answer it (tooLate).
func (h *hostBreaker) outlasts(now time.Time, p waitPolicy) *refusal {
	switch {
	case !p.until.IsZero() && !now.Before(p.until):
		return &refusal{detail: fmt.Sprintf("the host's breaker did not let it through before %s", p.bound),
			cause: p.ended(now)}
	case !p.until.IsZero() && !h.openUntil.Before(p.until):
		return &refusal{detail: fmt.Sprintf("the host's breaker is open for %s more, past %s, %s away",
			h.openUntil.Sub(now).Round(time.Millisecond), p.bound, p.until.Sub(now).Round(time.Millisecond))}
	}
	return h.tooLate(now, p.deadline)
}

// tooLate refuses a call whose deadline comes before the host could
// answer it: sooner after the end of the open period (or now) than the
// latest probe or released attempt that succeeded took. Such a call would only be cut by its
// own deadline, a load on the host that nobody waits for.
func (h *hostBreaker) tooLate(now, deadline time.Time) *refusal {
	if deadline.IsZero() || h.answer == 0 {
		return nil
	}
	from := now
	if now.Before(h.openUntil) {
		from = h.openUntil
	}
	if from.Add(h.answer).Before(deadline) {
		return nil
	}
	return &refusal{detail: fmt.Sprintf("its deadline, %s away, comes before the host could answer it (its latest answer after an opening took %s)",
		deadline.Sub(now).Round(time.Millisecond), h.answer.Round(time.Millisecond))}
}

// stopWaiting returns why a waiting call stops waiting: its context ended,
// or it can no longer be let through in time; nil when it waits on.
func (h *hostBreaker) stopWaiting(ctx context.Context, now time.Time, p waitPolicy, waited time.Duration) *refusal {
	if err := ctx.Err(); err != nil {
		return &refusal{detail: fmt.Sprintf("the call waited %s for the host's breaker and its context ended first",
			waited.Round(time.Millisecond)), cause: err}
	}
	if r := h.outlasts(now, p); r != nil {
		r.detail = fmt.Sprintf("the call waited %s, and %s", waited.Round(time.Millisecond), r.detail)
		return r
	}
	return nil
}

// keepTime arms timer for the next time the waiter at e must look again
// without being told: the end of the open period when it is at the head of
// the queue (it lets the others through then), the end of what it may
// wait, and the moment it can no longer be answered in time (tooLate). It
// returns the timer's channel, nil when there is nothing to wait for but
// a signal.
func (h *hostBreaker) keepTime(timer *time.Timer, e *list.Element, now time.Time, p waitPolicy) <-chan time.Time {
	var next time.Time
	if h.waiting.isFront(e) && now.Before(h.openUntil) {
		next = h.openUntil
	}
	until := p.until
	if !p.deadline.IsZero() && h.answer > 0 && (until.IsZero() || p.deadline.Add(-h.answer).Before(until)) {
		until = p.deadline.Add(-h.answer)
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
	head := h.waiting.isFront(e)
	h.waiting.take(e)
	if head {
		h.waiting.signalFront()
	}
}

// dispatch lets the waiting calls through while the host admits them
// (next says in which order), and tells the waiter left at the head of the
// queue when the head changed: the head keeps time for the others. When
// the queue empties, a recovery ends: new calls go straight to the breaker
// again.
func (h *hostBreaker) dispatch() {
	changed := false
	for h.waiting.len() > 0 {
		e, dropped := h.next()
		changed = changed || dropped
		if e == nil {
			break
		}
		tk, ok := h.try(false)
		if !ok {
			break
		}
		w := h.waiting.take(e)
		w.value, w.done = tk, true
		w.signal()
		changed = true
	}
	switch {
	case h.waiting.len() == 0:
		h.window, h.released = 0, 0
	case changed:
		h.waiting.signalFront()
	}
}

// next returns the waiting call to let through next. A probe goes to the
// oldest call whose deadline covers the probe's limit, or, when none does,
// to the one with the most time left: the oldest may have a moment left,
// and a probe cut short by its own deadline tells nothing. Otherwise the
// oldest goes first, after the calls at the head of the queue that can no
// longer be answered in time (tooLate) are turned away, which dropped
// reports.
func (h *hostBreaker) next() (e *list.Element, dropped bool) {
	if h.state != BreakerClosed {
		now := h.r.now()
		if now.Before(h.openUntil) || h.probesTaken() {
			return nil, false // no probe now: spare the scan
		}
		return h.waiting.covering(now, h.probeLimit), false
	}
	if h.answer == 0 {
		return h.waiting.front(), false
	}
	now := h.r.now()
	for e = h.waiting.front(); e != nil; e = h.waiting.front() {
		w := h.waiting.at(e)
		r := h.tooLate(now, w.deadline)
		if r == nil {
			break
		}
		h.waiting.take(e)
		w.refused, w.done, dropped = r, true, true
		w.signal()
	}
	return e, dropped
}

// probesTaken reports whether gobreaker is half-open with every probe out
// or answered, as its Allow would say (ErrTooManyRequests).
func (h *hostBreaker) probesTaken() bool {
	if h.state != BreakerHalfOpen {
		return false
	}
	c := h.cb.Counts()
	return c.Requests-min(c.TotalExclusions, c.Requests) >= h.r.cfg.Probes
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
	case hedge && (h.state != BreakerClosed || h.window > 0 || h.waiting.len() > 0):
		return ticket{}, false
	}
	if h.halfOpen {
		h.halfOpen = false
		h.report(gobreaker.StateOpen, gobreaker.StateHalfOpen)
	}
	probe := h.state != BreakerClosed // gobreaker is half-open, or goes half-open in Allow
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
	if probe {
		tk.limit, tk.start = h.probeLimit, h.r.now()
	}
	if h.window > 0 {
		h.released++
		tk.round, tk.start = h.round, h.r.now()
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
		period := h.openPeriod(from == gobreaker.StateHalfOpen)
		h.openUntil = h.r.now().Add(period)
		h.probeLimit = h.probeBound(period)
		h.window, h.released = 0, 0
		h.waiting.signalAll()
	case gobreaker.StateClosed:
		h.openUntil, h.period = time.Time{}, 0
		if h.waiting.len() > 0 {
			h.round++
			h.window, h.released = int(h.r.cfg.Probes), 0
			h.threshold, h.acks = 0, 0
		}
	}
	h.retryAfter = 0
	h.report(from, to)
}

// probeBound returns the limit of the probes after an open period of
// period: the period, between 1 s and OpenTimeout (or 1 s when that is
// shorter), and twice the limit of the latest probe when it failed by
// running into it, up to the same maximum: a host slower than its open
// period (a Retry-After of 1 s, answers in 1.5 s) is not kept out by
// probes cut before it can answer.
func (h *hostBreaker) probeBound(period time.Duration) time.Duration {
	most := max(h.r.cfg.OpenTimeout, firstOpenPeriod)
	bound := min(max(period, firstOpenPeriod), most)
	if h.slowProbe > 0 {
		bound = max(bound, min(2*h.slowProbe, most))
		h.slowProbe = 0
	}
	return bound
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
