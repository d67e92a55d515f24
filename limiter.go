package idem

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrOverloaded: the host's adaptive concurrency limit
// (see [Config.ConcurrencyLimit]) had no slot for the call's next request
// in time: before its deadline, within 20 ms (or two of the host's
// least RTT) while the host's line was overloaded, or at once for a
// fail-fast call; nothing was sent for it.
var ErrOverloaded = errors.New("idem: the host's concurrency limit had no slot")

// Adaptive concurrency per host: the requests in flight to a host are
// bounded by a limit that follows the latency trend (TCP Vegas's rule, as
// in Netflix's concurrency-limits and failsafe-go's AdaptiveLimiter): the
// requests queued at the host are estimated as limit × (1 − (minRTT +
// rttNoise)/RTT); fewer than vegasAlpha raise the limit by one a round trip (by one an
// answer, doubling it every round trip, while calls wait for a slot: the
// limit a failure cut must not starve the calls an outage left waiting),
// more than
// vegasBeta lower it by one a round trip, and a failure of the host
// (a 5xx, or a timeout well above its least RTT) cuts it by lossFactor,
// once a round trip (see release). The RTT is learned from a call's first
// attempt alone: a retry or a hedge may be answered by the host's
// idempotency layer (the stored answer, a 409 while the key is in flight)
// without the work, far sooner than the work answers. It is written here rather than
// taken from failsafe-go, because the root module depends on nothing but
// the standard library, uuid, gobreaker, x/time/rate and pgx (a test
// enforces it), and because its waiting must share the client's deadline
// rules (waitPolicy).
//
// A call that finds no slot waits in the host's line, within its
// deadline. The line is served newest first while the newest is fresh (it
// waited less than codelTarget), else oldest first (see dispatch); once
// the line is overloaded (it has not been empty for codelInterval), a
// call that has waited codelTarget leaves it with ErrOverloaded
// (Facebook's adaptive LIFO and CoDel, "Fail at Scale", 2015): the host
// then serves calls that still have time, and the client, not the host's
// queue, turns the excess away. Both spans are at least 10
// and 2 of the host's least RTT (codel): against a host answering in
// 200 ms, a call waiting 20 ms for a slot is no sign of a queue.
const (
	initialLimit  = 20
	minLimit      = 1
	maxLimit      = 200
	vegasAlpha    = 3
	vegasBeta     = 6
	lossFactor    = 0.9
	codelInterval = 100 * time.Millisecond // a line not empty for so long is overloaded
	codelTarget   = 20 * time.Millisecond  // the longest wait in an overloaded line
	rttWindow     = 1000                   // samples between resets of the minimum RTT
	// rttNoise is how much of an RTT above the host's least is read as
	// the client's own scheduling rather than a queue at the host: on a
	// host answering in 100 µs, an RTT of 500 µs says nothing of a queue.
	rttNoise = time.Millisecond
	// queuedFactor is how many of the host's least RTT an unanswered
	// attempt must have run for its timeout to be read as a queue at the
	// host: TCP Vegas reads an RTT of twice the least as half the limit
	// queued.
	queuedFactor = 2
)

// limiter bounds one host's requests in flight. Safe for concurrent use.
type limiter struct {
	mu        sync.Mutex
	limit     float64
	inflight  int
	minRTT    time.Duration        // the least RTT of the window so far
	baseRTT   time.Duration        // the least RTT of the last full window
	samples   int                  // in the current window
	line      waitQueue[time.Time] // each waiter holds when it joined
	lastEmpty time.Time            // when the line was last empty
	cutAt     time.Time            // when a failure last cut the limit
}

func newLimiter() *limiter { return &limiter{limit: initialLimit} }

// acquire takes a slot for the call's next request, waiting within what
// policy allows; it returns how long it waited and, when the call must not
// send, why.
func (l *limiter) acquire(ctx context.Context, policy func() waitPolicy, now func() time.Time) (time.Duration, *refusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.line.len() == 0 && l.inflight < int(l.limit) { // the clock only when needed
		l.inflight++
		return 0, nil
	}
	began := now()
	if l.line.len() == 0 {
		l.lastEmpty = began // it was empty until now
	}
	pol := policy()
	if pol.failFast {
		return 0, &refusal{detail: fmt.Sprintf("the host's concurrency limit (%d in flight) is reached and the call is fail-fast", l.inflight)}
	}
	w := newWaiter[time.Time](pol.until)
	w.value = began
	e := l.line.push(w)
	r := l.wait(ctx, w, e, pol, began, now)
	return now().Sub(began), r
}

// tryAcquire takes a slot when one is free and no call waits for one,
// reporting whether it did: a hedge never waits for a slot.
func (l *limiter) tryAcquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.line.len() == 0 && l.inflight < int(l.limit) {
		l.inflight++
		return true
	}
	return false
}

// force takes a slot whatever the limit: for an attempt that another
// pace already governs (see call.slot).
func (l *limiter) force() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight++
}

// wait keeps w in the line until it is given a slot, it must leave
// (its bound, an overloaded line) or ctx ends.
func (l *limiter) wait(ctx context.Context, w *waiter[time.Time], e *list.Element, pol waitPolicy, began time.Time, now func() time.Time) *refusal {
	for !w.done {
		t := now()
		interval, target := l.codel()
		overloaded := t.Sub(l.lastEmpty) >= interval
		switch {
		case ctx.Err() != nil || !pol.until.IsZero() && !t.Before(pol.until):
			l.leave(e, t)
			return &refusal{detail: "the host's concurrency limit had no slot before " + pol.bound, cause: cmpErr(ctx.Err(), pol.ended(t))}
		case overloaded && t.Sub(began) >= target:
			l.leave(e, t)
			return &refusal{detail: fmt.Sprintf("the host's line was overloaded and the call waited %s for a slot", t.Sub(began).Round(time.Millisecond))}
		}
		// Look again when the call has waited codelTarget, then every
		// codelTarget, when the line turns overloaded, or at its bound.
		wake := began.Add(target)
		if !wake.After(t) {
			wake = t.Add(target)
		}
		if turns := l.lastEmpty.Add(interval); turns.After(t) && turns.Before(wake) {
			wake = turns // when the line turns overloaded
		}
		if !pol.until.IsZero() && pol.until.Before(wake) {
			wake = pol.until
		}
		timer := pol.newTimer(wake.Sub(t))
		w.park(ctx, &l.mu, timer.C)
		timer.Stop()
	}
	return nil
}

// leave takes e out of the line at now.
func (l *limiter) leave(e *list.Element, now time.Time) {
	l.line.take(e)
	if l.line.len() == 0 {
		l.lastEmpty = now
	}
}

// sign is what an attempt that held a slot says of its host.
type sign int

const (
	noSign     sign = iota // nothing: not sent, or cancelled by the call
	answered               // an answer of the host's: its time is an RTT
	refused                // an answer that is a failure of the host (a 5xx)
	unanswered             // no answer: a timeout, a connection cut after the request
)

// release returns a slot, learning from the attempt that held it: what it
// says of the host (s) and how long it ran (elapsed, 0 when unknown). now
// is read only when calls wait or the host failed the attempt.
//
// A failure cuts the limit by lossFactor, at most once per round trip: an
// attempt that was already in flight at the last cut does not cut it
// again (as TCP reduces once per window), so a burst of failures from one
// slow spell cuts once. An unanswered attempt cuts it only when it ran
// more than queuedFactor of the host's least RTT: a timeout near the
// host's own answers says the work is slow (or the timeout tight), not
// that the host queues it, and a limit cut by it would turn calls away
// from a host that a plain client gets through to.
func (l *limiter) release(elapsed time.Duration, s sign, now func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	switch {
	case s == answered && elapsed > 0:
		l.learn(elapsed)
	case s == unanswered && l.base() > 0 && elapsed <= queuedFactor*l.base():
		// the host is slow, not queueing
	case s == refused || s == unanswered:
		t := now()
		if t.Sub(l.cutAt) >= elapsed { // began after the last cut
			l.limit = max(l.limit*lossFactor, minLimit)
			l.cutAt = t
		}
		if l.line.len() > 0 {
			l.dispatch(t)
		}
		return
	}
	if l.line.len() > 0 {
		l.dispatch(now())
	}
}

// codel returns how long the line must stay non-empty to be overloaded,
// and how long a call may wait in an overloaded line: codelInterval and
// codelTarget, or 10 and 2 of the host's base RTTs when longer. A wait
// that is short beside the host's own answers is no sign of overload: a
// host answering in 200 ms has calls wait a round trip for a slot without
// any queue.
func (l *limiter) codel() (interval, target time.Duration) {
	base := l.base()
	return max(codelInterval, 10*base), max(codelTarget, 2*base)
}

// base returns the host's least RTT known, 0 before the first answer.
func (l *limiter) base() time.Duration {
	if l.baseRTT > 0 && (l.minRTT == 0 || l.baseRTT < l.minRTT) {
		return l.baseRTT
	}
	return l.minRTT
}

// learn moves the limit by one RTT sample.
func (l *limiter) learn(rtt time.Duration) {
	if l.minRTT == 0 || rtt < l.minRTT {
		l.minRTT = rtt
	}
	if l.samples++; l.samples >= rttWindow {
		l.baseRTT, l.minRTT, l.samples = l.minRTT, 0, 0
	}
	queued := max(0, l.limit*(1-float64(l.base()+rttNoise)/float64(rtt)))
	switch {
	case queued < vegasAlpha && l.line.len() > 0: // calls wait: grow as TCP's slow start, doubling every round trip
		l.limit = min(l.limit+1, maxLimit)
	case queued < vegasAlpha && 2*(l.inflight+1) < int(l.limit):
		// Less than half the limit in use: the answer says nothing of a
		// higher one, and a limit grown while idle would let the next
		// overload fill the host's queue at once.
	case queued < vegasAlpha:
		l.limit = min(l.limit+1/l.limit, maxLimit)
	case queued > vegasBeta:
		l.limit = max(l.limit-1/l.limit, minLimit)
	}
}

// dispatch hands the free slots to the line: the newest first while it is
// fresh (it has waited less than the overloaded line's target), else the
// oldest. While calls arrive faster than the host answers, the newest is
// always fresh: the calls served are served at once, not after a wait
// that every later call would share, and those passed over leave the line
// once it is overloaded. When arrivals stop (a burst), the newest goes
// stale and the rest are served oldest first.
func (l *limiter) dispatch(now time.Time) {
	_, target := l.codel()
	for l.line.len() > 0 && l.inflight < int(l.limit) {
		e := l.line.front()
		if newest := l.line.l.Back(); now.Sub(l.line.at(newest).value) < target {
			e = newest
		}
		w := l.line.take(e)
		w.done = true
		l.inflight++
		w.signal()
	}
	if l.line.len() == 0 {
		l.lastEmpty = now
	}
}

// slot takes a slot of the call's host's limiter for its next request
// (nothing unless ConcurrencyLimit is set), and returns why not when it
// has none in time. An attempt that the host's breaker released from its
// line after an outage (tk) takes one without waiting: the breaker's
// recovery already paces those (one more in flight per answer, half as
// many after a failure), and a second pace in series would turn away, as
// an overload, calls that waited out the outage.
func (c *call) slot(ctx context.Context, tk ticket) *refusal {
	if !c.t.cfg.ConcurrencyLimit {
		return nil
	}
	c.limiter = c.t.limiters.get(c.hostName(), newLimiter)
	if tk.round != 0 {
		c.limiter.force()
		return nil
	}
	waited, r := c.limiter.acquire(ctx, func() waitPolicy { return c.waitPolicy(0) }, c.t.now)
	c.waited += waited
	if r != nil {
		c.limiter = nil
	}
	return r
}

// releaseSlot gives back the slot of the call's last request, learning
// from res, its result (a zero result: it was not sent).
func (c *call) releaseSlot(res result) {
	if c.limiter == nil {
		return
	}
	c.limiter.releaseAfter(res, false, c.t.now)
	c.limiter = nil
}

// releaseAfter gives back the slot of an attempt, learning from res, its
// result, unless lost: the attempt was cancelled because another attempt
// of its race won, which says nothing of the host. Only a call's first
// attempt gives an RTT: a retry or a hedge may be answered at once with
// the stored answer of an earlier attempt (a replay), which would teach
// the limit a least RTT the host's work never has, and read every answer
// and timeout of the work as a queue.
func (l *limiter) releaseAfter(res result, lost bool, now func() time.Time) {
	s := noSign
	switch {
	case lost:
	case res.certainty == Ambiguous:
		s = unanswered
	case res.certainty == Responded && res.rule != nil && res.rule.failure:
		s = refused
	case res.certainty == Responded && !res.hedge && res.resend.Certainty == 0:
		s = answered
	}
	l.release(res.elapsed, s, now)
}

// hedgeSlot takes a slot of the call's host's limiter for a hedge, at once
// or not at all (nil, true when ConcurrencyLimit is off); a hedge without
// one is not sent.
func (c *call) hedgeSlot() (*limiter, bool) {
	if !c.t.cfg.ConcurrencyLimit {
		return nil, true
	}
	l := c.t.limiters.get(c.hostName(), newLimiter)
	if !l.tryAcquire() {
		return nil, false
	}
	return l, true
}
