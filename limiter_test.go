package idem

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Slots up to the limit are taken at once; a fail-fast call past it is
// refused at once.
func TestLimiterAcquiresUpToTheLimit(t *testing.T) {
	clk := &jumpingClock{}
	l := newLimiter()
	for i := range initialLimit {
		waited, r := l.acquire(context.Background(), pacedPolicy(clk), clk.now)
		require.Nil(t, r, "slot %d", i)
		require.Zero(t, waited)
	}
	_, r := l.acquire(context.Background(), func() waitPolicy { return waitPolicy{failFast: true} }, clk.now)
	if r == nil {
		t.Fatal("a fail-fast call past the limit was let through")
	}
}

// A call alone in the line waits; once the line has not been empty for
// codelInterval and the call waited that long, it leaves with a refusal
// (the clock jumps to each timer's end: no real wait).
func TestLimiterOverloadedLineTurnsAwayAfterInterval(t *testing.T) {
	clk := &jumpingClock{}
	l := newLimiter()
	l.inflight = initialLimit
	waited, r := l.acquire(context.Background(), pacedPolicy(clk), clk.now)
	if r == nil || waited != codelInterval {
		t.Fatalf("waited %s, refusal %v; want a refusal after %s", waited, r, codelInterval)
	}
	if l.line.len() != 0 {
		t.Errorf("the call that left is still in line")
	}
}

// A waiting call leaves the line at its deadline.
func TestLimiterWaitEndsAtTheDeadline(t *testing.T) {
	clk := &jumpingClock{}
	l := newLimiter()
	l.inflight = initialLimit
	until := clk.now().Add(30 * time.Millisecond)
	pol := func() waitPolicy {
		return waitPolicy{until: until, deadline: until, bound: "the context's deadline", newTimer: clk.newTimer}
	}
	waited, r := l.acquire(context.Background(), pol, clk.now)
	if r == nil || waited != 30*time.Millisecond || !errors.Is(r.cause, context.DeadlineExceeded) {
		t.Fatalf("waited %s, refusal %+v; want one at the deadline, 30ms", waited, r)
	}
}

// A released slot goes to the newest waiter while it is fresh (it waited
// less than codelTarget), else to the oldest: calls arriving faster than
// the host answers are served at once, and a burst that stopped arriving
// is served oldest first.
func TestLimiterDispatchOrder(t *testing.T) {
	now := time.Unix(100, 0)
	for _, tc := range []struct {
		name   string
		newest time.Duration // how long the newest waited; the others waited longer
		want   int
	}{
		{"the newest fresh: newest first", codelTarget / 2, 2},
		{"the newest stale: oldest first", codelTarget, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter()
			l.inflight = initialLimit
			var ws []*waiter[time.Time]
			for i := range 3 {
				w := newWaiter[time.Time](time.Time{})
				w.value = now.Add(-tc.newest - time.Duration(2-i)*time.Second)
				l.line.push(w)
				ws = append(ws, w)
			}
			l.release(0, noSign, func() time.Time { return now })
			for i, w := range ws {
				if w.done != (i == tc.want) {
					t.Errorf("waiter %d done = %v, want only waiter %d", i, w.done, tc.want)
				}
			}
		})
	}
}

// A host answering in 200 ms keeps its line 10 round trips (2 s) before it
// is overloaded, and then a call waits 2 of them (400 ms): waiting a round
// trip for a slot is no sign of a queue. Here the line has not been empty
// for 1 s: the call waits until it turns overloaded, 1 s on, and leaves.
func TestLimiterSlowHostLineSpans(t *testing.T) {
	clk := &jumpingClock{}
	l := newLimiter()
	l.inflight, l.minRTT = initialLimit, 200*time.Millisecond
	l.line.push(newWaiter[time.Time](time.Time{})) // an older call, still waiting
	l.lastEmpty = clk.now().Add(-time.Second)
	waited, r := l.acquire(context.Background(), pacedPolicy(clk), clk.now)
	if r == nil || waited != time.Second {
		t.Fatalf("waited %s, refusal %v; want a refusal after 1s", waited, r)
	}
}

// The limit follows the latency trend: answers at the base RTT raise it,
// answers queued at the host (twice the base: half the limit queued) lower
// it, and a failure cuts it by lossFactor.
func TestLimiterLimitFollowsLatency(t *testing.T) {
	now := time.Unix(100, 0)
	l := newLimiter()
	l.inflight = initialLimit - 1 // the limit in use
	for range 40 {
		l.inflight++
		l.release(10*time.Millisecond, answered, func() time.Time { return now })
	}
	if l.limit <= initialLimit+1 {
		t.Errorf("limit %.2f after 40 answers at the base RTT, want above %d", l.limit, initialLimit+1)
	}
	raised := l.limit
	for range 40 {
		l.inflight++
		l.release(20*time.Millisecond, answered, func() time.Time { return now })
	}
	if l.limit >= raised-1 {
		t.Errorf("limit %.2f after 40 answers queued at the host, want below %.2f", l.limit, raised-1)
	}
	before := l.limit
	l.inflight++
	l.release(0, refused, func() time.Time { return now })
	if want := before * lossFactor; l.limit != want {
		t.Errorf("limit %.2f after a failure, want %.2f", l.limit, want)
	}
}

// End to end, with ConcurrencyLimit: calls are sent and each returns its
// slot (none left held after they end).
func TestTransportConcurrencyLimitReleasesSlots(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	tr, _ := newTestTransport(t, Config{ConcurrencyLimit: true})
	c := &http.Client{Transport: tr}
	for range 5 {
		resp, err := c.Get(srv.URL)
		require.NoError(t, err)
		resp.Body.Close()
	}
	l := tr.limiters.get(string(appendHostKey(nil, mustURL(t, srv.URL))), newLimiter)
	if l.inflight != 0 {
		t.Errorf("%d slots held after every call ended, want 0", l.inflight)
	}
}

// While calls wait for a slot, answers at the base RTT raise the limit by
// one each (TCP's slow start), not by one a round trip.
func TestLimiterSlowStartWhileCallsWait(t *testing.T) {
	l := newLimiter()
	l.limit = 2
	l.line.push(newWaiter[time.Time](time.Time{}))
	l.line.push(newWaiter[time.Time](time.Time{}))
	l.line.push(newWaiter[time.Time](time.Time{}))
	l.learn(10 * time.Millisecond)
	l.learn(10 * time.Millisecond)
	if l.limit != 4 {
		t.Errorf("limit %.2f after 2 answers with calls waiting, want 4", l.limit)
	}
}

// In a line that has been overloaded for a while, a call waits codelTarget
// (20 ms) for a slot, then leaves with a refusal: the calls served are
// fresh ones.
func TestLimiterOverloadedLineWaitsTheTarget(t *testing.T) {
	clk := &jumpingClock{}
	l := newLimiter()
	l.inflight = initialLimit
	l.line.push(newWaiter[time.Time](time.Time{})) // an older call, still waiting
	l.lastEmpty = clk.now().Add(-time.Second)
	waited, r := l.acquire(context.Background(), pacedPolicy(clk), clk.now)
	if r == nil || waited != codelTarget || waited >= codelInterval {
		t.Fatalf("waited %s, refusal %v; want a refusal after %s, before the line's %s", waited, r, codelTarget, codelInterval)
	}
}

// A hedge takes a slot of its host's concurrency limit like any attempt,
// without waiting for one: with the limit full no hedge is sent (the call
// waits for its attempt, and no budget token is spent); with a slot
// free the hedge goes and gives its slot back when it ends; a hedge that
// lost its race does not cut the limit (its cancellation is no failure of
// the host).
func TestLimiterBoundsHedges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   float64
		latency func(int) time.Duration
		took    time.Duration
		calls   int32
		retries uint64
		after   float64 // the limit after the call: one answer raises it by 1/limit
	}{
		{"full", 1, slowFirst(50 * time.Millisecond), 50 * time.Millisecond, 1, 0, 2},
		{"room, the hedge wins", 2, slowFirst(50 * time.Millisecond), 10 * time.Millisecond, 2, 1, 2}, // answered in 0 s: no RTT
		{"room, the hedge loses", 2, func(n int) time.Duration {
			if n == 1 {
				return 30 * time.Millisecond
			}
			return time.Hour
		}, 30 * time.Millisecond, 2, 1, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scripted{latency: tc.latency}
				budget := NewBudget(BudgetConfig{FloorRate: 100, FloorBurst: 100})
				tr := NewTransport(Config{Base: base, Budget: budget, ConcurrencyLimit: true,
					Hedge: HedgeConfig{Delay: 10 * time.Millisecond}})
				l := tr.limiters.get("http://api.test:80", newLimiter)
				l.limit = tc.limit
				start := time.Now()
				resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
				require.NoError(t, err)
				discard(resp)
				assert.Equal(t, tc.took, time.Since(start))
				synctest.Wait()
				assert.EqualValues(t, tc.calls, base.calls.Load(), "requests sent")
				assert.EqualValues(t, tc.retries, budget.Stats().Retries, "tokens spent")
				assert.Zero(t, budget.Stats().Returned, "tokens given back")
				l.mu.Lock()
				defer l.mu.Unlock()
				assert.Zero(t, l.inflight, "slots held after the call")
				assert.Equal(t, tc.after, l.limit, "the limit learned the answer alone")
				assertHostIdle(t, tr)
			})
		})
	}
}

// The limit learns each answer's RTT with no Observer and no hedging set
// (the attempt is timed for the limit alone): a host answering in 10 ms
// gives the limit its minimum RTT.
func TestLimiterLearnsTheRTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: func(int) time.Duration { return 10 * time.Millisecond }}
		tr := NewTransport(Config{Base: base, ConcurrencyLimit: true})
		resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
		require.NoError(t, err)
		discard(resp)
		l := tr.limiters.get("http://api.test:80", newLimiter)
		l.mu.Lock()
		defer l.mu.Unlock()
		assert.Equal(t, 10*time.Millisecond, l.minRTT, "the RTT learned")
	})
}

// An answer while less than half the limit is in use does not raise it: a
// limit grown while the host was underused would let the next overload
// fill the host's queue at once.
func TestLimiterDoesNotGrowWhileUnderused(t *testing.T) {
	now := func() time.Time { return time.Unix(100, 0) }
	for _, tc := range []struct {
		inflight int // before the answer's release
		grows    bool
	}{{2, false}, {initialLimit / 2, true}, {initialLimit, true}} {
		l := newLimiter()
		l.inflight = tc.inflight
		l.release(10*time.Millisecond, answered, now)
		if grew := l.limit > initialLimit; grew != tc.grows {
			t.Errorf("%d in flight: limit %.2f after an answer at the base RTT, want growth %v", tc.inflight, l.limit, tc.grows)
		}
	}
}

// On a host answering in 100 µs, answers in 500 µs (the client's own
// scheduling, not a queue) do not lower the limit: an RTT within rttNoise
// of the least says nothing of a queue.
func TestLimiterIgnoresSchedulingNoise(t *testing.T) {
	now := func() time.Time { return time.Unix(100, 0) }
	l := newLimiter()
	l.inflight = initialLimit
	l.release(100*time.Microsecond, answered, now)
	for range 40 {
		l.inflight++
		l.release(500*time.Microsecond, answered, now)
	}
	if l.limit < initialLimit {
		t.Errorf("limit %.2f after answers within 400 µs of the least RTT, want at least %d", l.limit, initialLimit)
	}
}

// An attempt that the host's breaker released from its line after an
// outage (its ticket names the recovery) takes a slot past the limit
// without waiting: the recovery paces those already. Any other attempt
// past the limit waits (a fail-fast one is refused at once).
func TestLimiterLetsReleasedAttemptsThrough(t *testing.T) {
	tr := NewTransport(Config{ConcurrencyLimit: true, FailFast: true})
	req := mustGet(t, "http://api.test/item")
	l := tr.limiters.get("http://api.test:80", newLimiter)
	l.inflight = initialLimit
	c := call{t: tr, req: req}
	if r := c.slot(context.Background(), ticket{}); r == nil {
		t.Fatal("a fail-fast call past the limit got a slot")
	}
	c = call{t: tr, req: req}
	if r := c.slot(context.Background(), ticket{round: 1}); r != nil {
		t.Fatalf("an attempt released by the breaker's recovery was refused: %v", r)
	}
	if l.inflight != initialLimit+1 {
		t.Errorf("%d in flight, want %d", l.inflight, initialLimit+1)
	}
}

// slowHostRound is one round trip of 16 callers on a host whose work takes
// about the 200 ms attempt timeout, with no queue: 8 first attempts
// answered in 160 to 195 ms, 6 attempts that time out at 200 ms, and 2
// retries answered at once by the host's idempotency layer (the stored
// answer of an attempt that timed out).
func slowHostRound(t *testing.T, l *limiter) {
	t.Helper()
	ok := classify(Responded, http.StatusCreated, "")
	var held []result
	for i := range 16 {
		require.True(t, l.tryAcquire(), "caller %d found no slot: limit %.2f", i, l.limit)
		switch {
		case i < 8:
			held = append(held, result{certainty: Responded, rule: ok, number: 1, elapsed: time.Duration(160+5*i) * time.Millisecond})
		case i < 14:
			held = append(held, result{certainty: Ambiguous, rule: classify(Ambiguous, 0, ""), number: 1, elapsed: 200 * time.Millisecond})
		default:
			held = append(held, result{certainty: Responded, rule: ok, number: 2, elapsed: time.Millisecond,
				resend: Resend{Certainty: Ambiguous}})
		}
	}
	time.Sleep(200 * time.Millisecond)
	for _, res := range held {
		l.releaseAfter(res, false, time.Now)
	}
}

// A slow host is not an overloaded one: its work takes about the attempt
// timeout, so that half the attempts time out, but its answers do not
// slow down (no queue grows). Over 5 s of it the limit stays near its
// start, and 16 callers always find a slot: a timeout near the host's
// least RTT does not cut the limit, and a retry answered at once (a
// replay) does not teach it a least RTT the work never has. (Before, each
// timeout cut the limit by 10%: it fell below 16 in the first round trip.)
func TestLimiterSlowHostKeepsItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter()
		for range 25 {
			slowHostRound(t, l)
		}
		assert.GreaterOrEqual(t, l.limit, float64(initialLimit)*lossFactor, "the limit after 5 s of a slow host")
		assert.Greater(t, l.base(), 150*time.Millisecond, "the least RTT learned")
		assert.Zero(t, l.inflight)
	})
}

// An overloaded host still cuts the limit: once its answers rise far
// above the least RTT (10 ms) and its attempts time out at 200 ms, 20
// times the least, each round trip of timeouts cuts the limit by
// lossFactor, once (as TCP reduces once per window: the attempts in
// flight at a cut do not cut again), and the limit falls round after
// round.
func TestLimiterOverloadedHostCuts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter()
		l.inflight = initialLimit
		for _, rtt := range []time.Duration{10, 10, 40, 80, 150} { // the host's queue grows
			l.release(rtt*time.Millisecond, answered, time.Now)
			l.inflight++
		}
		l.inflight--
		require.Equal(t, 10*time.Millisecond, l.base())
		before := l.limit
		timeouts := func() {
			n := int(l.limit)
			l.inflight += n
			time.Sleep(200 * time.Millisecond)
			for range n {
				l.release(200*time.Millisecond, unanswered, time.Now)
			}
		}
		timeouts()
		assert.InDelta(t, before*lossFactor, l.limit, 1e-9, "a round trip of timeouts cuts once")
		for range 9 {
			timeouts()
		}
		assert.InDelta(t, before*math.Pow(lossFactor, 10), l.limit, 1e-9, "ten round trips of timeouts cut ten times")
		assert.Less(t, l.limit, float64(initialLimit)/2)
	})
}
