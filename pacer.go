package idem

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// ErrRateLimited: the host's announced quota (the RateLimit and
// RateLimit-Policy response fields) had no room for the call's next
// request before its deadline, or at once for a fail-fast call; nothing
// was sent for it.
var ErrRateLimited = errors.New("idem: the host's announced quota has no room")

// Pacing by the host's announced quota: a host that sends the IETF
// RateLimit fields (draft-ietf-httpapi-ratelimit-headers) is sent at most
// paceShare of its quota q per window w, with a burst of paceBurst of q,
// so that a fixed window of w never sees more than q of this client's
// requests; a response saying that nothing is left (r=0) holds every
// request until the window resets (t). Requests that must wait, first
// attempts and retries alike, wait in one line (see choose for its order);
// a call whose deadline comes first leaves the line.
const (
	paceShare   = 0.97
	paceBurst   = 0.02
	shortLine   = 100 * time.Millisecond // a line that clears within it is short; a call that waited less is fresh
	oldestEvery = 4                      // of the slots of a long line, this one in so many goes to the oldest
)

// newPacer is the pacer of a host that announced a quota.
func newPacer() *pacer { return &pacer{} }

// pacer spaces one host's requests by its announced quota. Safe for
// concurrent use.
type pacer struct {
	mu       sync.Mutex
	interval time.Duration        // between sends; 0 while no policy is known
	tau      time.Duration        // the burst allowed ahead of the pace
	tat      time.Time            // when the next send is due at the pace (GCRA)
	closed   time.Time            // nothing left of the quota until then
	line     waitQueue[time.Time] // each waiter holds when it joined
	handed   uint64               // slots handed out of the line
}

// learn records what a response received at now announced; refused says
// that it refused the request for the quota (429). A response that says
// nothing is left (r=0) holds every request until the window resets (t),
// unless it served the request and the policy is known: the next request
// then waits for the pace's next slot after now (the pace keeps the next
// window's requests within it, while t, in whole seconds rounded up, may
// overshoot the reset by up to a second).
func (p *pacer) learn(rl wire.RateLimit, refused bool, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rl.Quota > 0 && rl.Window > 0 {
		p.interval = time.Duration(float64(rl.Window) / (paceShare * float64(rl.Quota)))
		p.tau = time.Duration(max(paceBurst*float64(rl.Quota)-1, 0)) * p.interval
	}
	switch {
	case rl.Remaining > 0:
	case refused || p.interval == 0:
		if now.Add(rl.Reset).After(p.closed) {
			p.closed = now.Add(rl.Reset)
		}
	default: // the last of the window was served: the next send waits one pace at least
		p.tat = later(p.tat, now.Add(p.tau+p.interval))
	}
	p.line.signalFront() // the earliest send may have moved
}

// slot returns the earliest time at or after now a request may be sent.
func (p *pacer) slot(now time.Time) time.Time {
	at := now
	if p.interval > 0 && p.tat.Add(-p.tau).After(at) {
		at = p.tat.Add(-p.tau)
	}
	if p.closed.After(at) {
		at = p.closed
	}
	return at
}

// spend takes the slot of a request sent at now.
func (p *pacer) spend(now time.Time) {
	if p.interval > 0 {
		p.tat = later(p.tat, now).Add(p.interval)
	}
}

// choose returns the waiter the next slot goes to at now, and takes it out
// of the line. A line that clears within shortLine is served oldest first.
// A longer one (the quota is below the offered load) is served so that
// most calls are served at once and the quota is used to the end:
//
//   - the newest first, while it is fresh (it waited less than shortLine):
//     under a quota below the offered load, a call served as it arrives
//     is served fast, where serving the oldest first would make every
//     call wait until it nearly times out;
//   - every oldestEvery-th slot to the oldest waiter that still has
//     shortLine before its deadline: those the newest passed are not all
//     left to expire, and their turn comes while they can use it;
//   - the oldest with shortLine left whenever no fresh call waits (the
//     load has fallen below the quota): the calls that waited are served
//     before their deadlines, and the quota's next windows are used
//     rather than left idle while they expire.
//
// A slot given to a call about to time out would be wasted: the oldest
// served is the oldest with shortLine left, or else the one with the most.
func (p *pacer) choose(now time.Time) *waiter[time.Time] {
	p.handed++
	e := p.line.covering(now, shortLine)
	newest := p.line.l.Back()
	long := p.interval > 0 && time.Duration(p.line.len())*p.interval > shortLine
	if long && p.handed%oldestEvery != 0 && now.Sub(p.line.at(newest).value) < shortLine {
		e = newest
	}
	w := p.line.take(e)
	w.done = true
	return w
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// take waits for a slot to send the call's next request, within what
// policy allows (see waitPolicy); it returns how long it waited and, when
// the call must not send, why.
func (p *pacer) take(ctx context.Context, policy func() waitPolicy, now func() time.Time) (time.Duration, *refusal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	began := now()
	at := p.slot(began)
	if !at.After(began) && p.line.len() == 0 {
		p.spend(began)
		return 0, nil
	}
	pol := policy()
	if pol.failFast || !pol.until.IsZero() && at.After(pol.until) {
		return 0, &refusal{detail: fmt.Sprintf("the host's quota has room in %s, past %s",
			at.Sub(began).Round(time.Millisecond), pacedBound(pol)), cause: pol.ended(began)}
	}
	w := newWaiter[time.Time](pol.until)
	w.value = began
	e := p.line.push(w)
	r := p.queue(ctx, w, e, pol, now)
	return now().Sub(began), r
}

// tryTake takes the slot of a request sent at now when the pace has one
// due and no call waits for one, reporting whether it did: a hedge never
// waits for the pace.
func (p *pacer) tryTake(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line.len() > 0 || p.slot(now).After(now) {
		return false
	}
	p.spend(now)
	return true
}

func pacedBound(pol waitPolicy) string {
	if pol.failFast {
		return "a fail-fast call's"
	}
	return pol.bound
}

// queue keeps w in the line until it is given a slot, its wait bound
// passes or ctx ends. The oldest waiter wakes for each slot and hands it
// out (choose); the others wake when handed one or at their bound.
func (p *pacer) queue(ctx context.Context, w *waiter[time.Time], e *list.Element, pol waitPolicy, now func() time.Time) *refusal {
	for !w.done {
		t := now()
		at := p.slot(t)
		if p.line.isFront(e) && !at.After(t) {
			got := p.choose(t)
			p.spend(t)
			p.line.signalFront()
			if got != w {
				got.signal()
			}
			continue
		}
		if ctx.Err() != nil || !pol.until.IsZero() && !t.Before(pol.until) {
			front := p.line.isFront(e)
			p.line.take(e)
			if front {
				p.line.signalFront()
			}
			return &refusal{detail: "the host's quota had no room before " + pol.bound, cause: cmpErr(ctx.Err(), pol.ended(t))}
		}
		wake := pol.until
		if p.line.isFront(e) && (wake.IsZero() || at.Before(wake)) {
			wake = at
		}
		if wake.IsZero() {
			w.park(ctx, &p.mu, nil)
			continue
		}
		timer := pol.newTimer(wake.Sub(t))
		w.park(ctx, &p.mu, timer.C)
		timer.Stop()
	}
	return nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// pace waits for the call's host's announced quota to have room for its
// next request (none when the host announced no quota), and returns why
// not when it has none in time.
func (c *call) pace(ctx context.Context) *refusal {
	p := c.t.pacers.get(c.hostName(), nil)
	if p == nil {
		return nil
	}
	waited, r := p.take(ctx, func() waitPolicy { return c.waitPolicy(0) }, c.t.now)
	c.waited += waited
	return r
}

// paceHedge takes a slot of the call's host's announced quota for a
// hedge, at once or not at all (true when the host announced none).
func (c *call) paceHedge() bool {
	p := c.t.pacers.get(c.hostName(), nil)
	return p == nil || p.tryTake(c.t.now())
}

// learnQuota records the quota a response announced, if any.
func (c *call) learnQuota(res result) {
	if res.rateLimit != nil {
		c.t.pacers.get(c.hostName(), newPacer).learn(*res.rateLimit, res.status == http.StatusTooManyRequests, c.t.now())
	}
}
