package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// jumpingClock is a fake clock whose timers fire at once, moving the clock
// to their end: a wait for a slot takes no real time and ends exactly when
// the slot is due.
type jumpingClock struct{ fakeClock }

func (c *jumpingClock) newTimer(d time.Duration) *time.Timer {
	c.advance(d)
	return time.NewTimer(0)
}

func pacedPolicy(c *jumpingClock) func() waitPolicy {
	return func() waitPolicy { return waitPolicy{newTimer: c.newTimer} }
}

// A host's announced quota spaces its requests: q=10 per 1 s window is
// sent at most 9.7 a second, one every 103 ms.
func TestPacerSpacesByPolicy(t *testing.T) {
	clk := &jumpingClock{}
	p := &pacer{}
	p.learn(wire.RateLimit{Remaining: 9, Reset: time.Second, Quota: 10, Window: time.Second}, false, clk.now())
	quota := 10.0
	want := time.Duration(float64(time.Second) / (paceShare * quota))
	for i, w := range []time.Duration{0, want, want} {
		waited, r := p.take(context.Background(), pacedPolicy(clk), clk.now)
		require.Nil(t, r, "take %d refused", i)
		if waited != w {
			t.Errorf("take %d waited %s, want %s", i, waited, w)
		}
	}
}

// A 429 that says nothing is left (r=0) holds every request until the
// window resets; a success saying r=0 under a known policy holds the next
// request for one slot of the pace only (t, in whole seconds, may
// overshoot the reset by a second).
func TestPacerHoldsUntilResetAfterRefusal(t *testing.T) {
	clk := &jumpingClock{}
	p := &pacer{}
	p.learn(wire.RateLimit{Remaining: 0, Reset: time.Second, Quota: 1000, Window: time.Second}, false, clk.now())
	quota := 1000.0
	slot := time.Duration(float64(time.Second) / (paceShare * quota))
	if waited, r := p.take(context.Background(), pacedPolicy(clk), clk.now); r != nil || waited != slot {
		t.Fatalf("after a served r=0: waited %s (%v), want %s", waited, r, slot)
	}
	p.learn(wire.RateLimit{Remaining: 0, Reset: 2 * time.Second, Quota: 1000, Window: time.Second}, true, clk.now())
	waited, r := p.take(context.Background(), pacedPolicy(clk), clk.now)
	require.Nil(t, r)
	if waited != 2*time.Second {
		t.Errorf("after a 429 with t=2: waited %s, want 2s", waited)
	}
}

// A call whose deadline comes before the slot, or that is fail-fast, is
// refused at once.
func TestPacerRefusesWhatCannotFit(t *testing.T) {
	clk := &jumpingClock{}
	p := &pacer{}
	p.learn(wire.RateLimit{Remaining: 0, Reset: time.Second, Quota: 1, Window: time.Second}, true, clk.now())
	for name, pol := range map[string]waitPolicy{
		"deadline":  {until: clk.now().Add(500 * time.Millisecond), bound: "the context's deadline", newTimer: clk.newTimer},
		"fail-fast": {failFast: true},
	} {
		waited, r := p.take(context.Background(), func() waitPolicy { return pol }, clk.now)
		if r == nil || waited != 0 {
			t.Errorf("%s: waited %s, refusal %v; want a refusal at once", name, waited, r)
		}
	}
}

// The order of a line (on a clock the test sets): a short line is served
// oldest first; a long one newest first while the newest is fresh, every
// oldestEvery-th slot to the oldest that still has shortLine left; and
// oldest first once no fresh call waits (the load fell below the quota).
// A waiter about to time out is passed over.
func TestPacerLineOrder(t *testing.T) {
	now := time.Unix(100, 0)
	// Five waiters, oldest first: how long each has waited, and has left.
	waited := []time.Duration{2900 * time.Millisecond, 80 * time.Millisecond, 60 * time.Millisecond, 40 * time.Millisecond, 0}
	left := []time.Duration{50 * time.Millisecond, time.Second, 2 * time.Second, 2500 * time.Millisecond, 3 * time.Second}
	for _, tc := range []struct {
		name     string
		interval time.Duration // the pace; 5 waiters take 5 of them
		age      time.Duration // added to every waiter's wait
		want     []int         // the waiters served by the next slots
	}{
		{"short line: oldest with time left first", 10 * time.Millisecond, 0, []int{1, 2, 3, 4}},
		{"long line, fresh: newest, 1 in 4 to the oldest", 50 * time.Millisecond, 0, []int{4, 3, 2, 1}},
		{"long line, none fresh: oldest with time left first", 50 * time.Millisecond, shortLine, []int{1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pacer{interval: tc.interval}
			var ws []*waiter[time.Time]
			for i := range waited {
				w := newWaiter[time.Time](now.Add(left[i] - tc.age))
				w.value = now.Add(-waited[i] - tc.age)
				p.line.push(w)
				ws = append(ws, w)
			}
			for slot, want := range tc.want {
				if got := p.choose(now); got != ws[want] {
					t.Errorf("slot %d went to waiter %d, want %d", slot, slices.Index(ws, got), want)
				}
			}
			if p.line.len() != 1 || p.line.at(p.line.front()) != ws[0] {
				t.Errorf("the waiter about to time out should be left in line")
			}
		})
	}
}

// End to end: a host announcing a quota of 1 a second is sent one request;
// the next call, whose deadline comes before the quota has room again,
// fails at once with ErrRateLimited and sends nothing.
func TestTransportPacesByRateLimitFields(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("RateLimit-Policy", `"default";q=1;w=1`)
		w.Header().Set("RateLimit", `"default";r=0;t=1`)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	tr, _ := newTestTransport(t, Config{})
	clk := &fakeClock{}
	clk.advance(time.Duration(time.Now().UnixNano()))
	tr.now = clk.now
	c := &http.Client{Transport: tr}
	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	_, err = c.Do(req)
	if !errors.Is(err, ErrRateLimited) {
		t.Fatalf("second call: %v, want ErrRateLimited", err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("host saw %d requests, want 1", n)
	}
}

// retry-after-ms is preferred to Retry-After: it is the more precise.
func TestRetryAfterMsPreferred(t *testing.T) {
	h := http.Header{}
	h.Set("Retry-After", "2")
	h.Set("Retry-After-Ms", "150")
	tr := NewTransport(Config{})
	if got := (sender{t: tr}).retryAfter(h); got != 150*time.Millisecond {
		t.Errorf("retryAfter = %s, want 150ms", got)
	}
	h.Del("Retry-After-Ms")
	if got := (sender{t: tr}).retryAfter(h); got != 2*time.Second {
		t.Errorf("retryAfter without retry-after-ms = %s, want 2s", got)
	}
}

// A hedge takes the pace of its host's announced quota like any attempt,
// without waiting for it: at 10 a second the first attempt took the slot
// and the next is 103 ms away, so no hedge is sent at 10 ms (and the
// budget gets its token back); at 1,000 a second (a burst of 20) the hedge
// goes, and takes a slot of the pace.
func TestPacerPacesHedges(t *testing.T) {
	for _, tc := range []struct {
		quota    int
		took     time.Duration
		calls    int32
		returned uint64
	}{
		{10, 50 * time.Millisecond, 1, 1},
		{1000, 10 * time.Millisecond, 2, 0},
	} {
		t.Run(fmt.Sprint(tc.quota), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scripted{latency: slowFirst(50 * time.Millisecond)}
				budget := NewBudget(BudgetConfig{FloorRate: 100, FloorBurst: 100})
				tr := NewTransport(Config{Base: base, Budget: budget, Hedge: HedgeConfig{Delay: 10 * time.Millisecond}})
				p := tr.pacers.get("http://api.test:80", newPacer)
				p.learn(wire.RateLimit{Remaining: tc.quota - 1, Reset: time.Second, Quota: tc.quota, Window: time.Second}, false, time.Now())
				start := time.Now()
				resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
				require.NoError(t, err)
				discard(resp)
				assert.Equal(t, tc.took, time.Since(start))
				synctest.Wait()
				assert.EqualValues(t, tc.calls, base.calls.Load(), "requests sent")
				assert.EqualValues(t, tc.returned, budget.Stats().Returned, "tokens given back")
				p.mu.Lock()
				defer p.mu.Unlock()
				interval := time.Duration(float64(time.Second) / (paceShare * float64(tc.quota)))
				want := start.Add(interval) // the first attempt's slot
				if tc.calls == 2 {
					want = start.Add(10*time.Millisecond + interval) // and the hedge's, at 10 ms
				}
				assert.Equal(t, want, p.tat, "the pace's slots taken")
				assertHostIdle(t, tr)
			})
		})
	}
}
