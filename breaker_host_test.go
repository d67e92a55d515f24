package idem

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outageHost is a base RoundTripper that plays a host in memory, on
// synctest's clock: it answers 503 (with retryAfter, when set) until up,
// then 201, each after latency, and records what reached it.
type outageHost struct {
	latency    time.Duration
	retryAfter string

	mu       sync.Mutex
	up       bool
	inFlight int
	order    []arrival // the requests, in the order they arrived
}

type arrival struct {
	key string
	at  time.Time
}

func (h *outageHost) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	h.mu.Lock()
	h.inFlight++
	h.order = append(h.order, arrival{r.Header.Get(KeyHeader), time.Now()})
	h.mu.Unlock()
	time.Sleep(h.latency)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inFlight--
	resp := &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}
	if !h.up {
		resp.StatusCode = http.StatusServiceUnavailable
		if h.retryAfter != "" {
			resp.Header.Set("Retry-After", h.retryAfter)
		}
	}
	return resp, nil
}

func (h *outageHost) setUp(up bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.up = up
}

func (h *outageHost) requests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.order)
}

// inFlightNow returns the attempts in flight at this instant.
func (h *outageHost) inFlightNow() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight
}

// trip opens tr's breaker for the host with ConsecutiveFailures calls of
// one attempt each.
func trip(t *testing.T, tr *Transport, n int) {
	t.Helper()
	for range n {
		ctx := WithFailFast(WithoutRetry(context.Background()))
		resp, err := tr.RoundTrip(post(t, ctx, "http://api.test/pay", `{}`))
		require.NoError(t, err, "the 503 is returned")
		discard(resp)
	}
}

func pay(t *testing.T, tr *Transport, ctx context.Context, key string) (*http.Response, error) {
	t.Helper()
	resp, err := tr.RoundTrip(post(t, WithKey(ctx, key), "http://api.test/pay", `{}`))
	if err == nil {
		discard(resp)
	}
	return resp, err
}

// Issue 26, point 1: a call that meets its host's open breaker waits,
// sending nothing, and is let through when the host may be tried again,
// inside its deadline.
func TestOpenBreakerWaitsForTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &outageHost{}
		tr := NewTransport(Config{Base: host, NoBudget: true, Breaker: BreakerConfig{ConsecutiveFailures: 3}})
		trip(t, tr, 3)
		host.setUp(true)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		resp, err := pay(t, tr, ctx, "pay-1")
		require.NoError(t, err, "it waited for the host instead of failing")
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, time.Second, time.Since(start), "let through as the probe at the end of the 1 s open period")
		assert.Equal(t, 4, host.requests(), "nothing was sent while it waited")
	})
}

// Fail-fast stays available: Config.FailFast for every call, WithFailFast
// for one; the error says so and that the call did not wait.
func TestFailFastRefusesAtOnce(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		ctx  func(context.Context) context.Context
	}{
		{"Config.FailFast", Config{FailFast: true}, func(ctx context.Context) context.Context { return ctx }},
		{"WithFailFast", Config{}, WithFailFast},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				host := &outageHost{}
				cfg := tt.cfg
				cfg.Base, cfg.NoBudget, cfg.Breaker = host, true, BreakerConfig{ConsecutiveFailures: 1}
				tr := NewTransport(cfg)
				trip(t, tr, 1)
				start := time.Now()
				_, err := pay(t, tr, tt.ctx(context.Background()), "pay-1")
				require.ErrorIs(t, err, ErrCircuitOpen)
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Zero(t, time.Since(start))
				assert.Zero(t, e.Waited)
				assert.Contains(t, e.Detail, "fail-fast")
				assert.Equal(t, 1, host.requests())
			})
		})
	}
}

// A call whose deadline comes before the end of the open period does not
// wait at all (x/time/rate's Wait rule), and the error says why.
func TestWaitRefusedWhenTheDeadlineComesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &outageHost{}
		tr := NewTransport(Config{Base: host, NoBudget: true, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
		trip(t, tr, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := pay(t, tr, ctx, "pay-1")
		require.ErrorIs(t, err, ErrCircuitOpen)
		assert.Zero(t, time.Since(start), "failed at once")
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Zero(t, e.Waited)
		assert.Equal(t, "the host's breaker is open for 1s more, past the context's deadline, 500ms away", e.Detail)
		assert.False(t, e.MayHaveTakenEffect)
	})
}

// A waiting call whose host reopens for longer than its deadline allows
// stops waiting then, not at its deadline; one whose context is cancelled
// stops at once. Both errors say how long they waited.
func TestWaitEndsWhenItCannotSucceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &outageHost{}
		tr := NewTransport(Config{Base: host, NoBudget: true, MaxAttempts: 1, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
		trip(t, tr, 1)

		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		cancelled, cancelWaiter := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var waiterErr error
		wg.Go(func() {
			time.Sleep(time.Millisecond) // behind the first: the probe is not it
			_, waiterErr = pay(t, tr, cancelled, "pay-2")
		})
		wg.Go(func() {
			time.Sleep(1500 * time.Millisecond)
			cancelWaiter()
		})
		start := time.Now()
		_, err := pay(t, tr, ctx, "pay-1") // the probe at 1 s: a 503, which reopens the breaker for 2 s
		require.NoError(t, err, "the probe's 503 is its answer (one attempt)")
		assert.Equal(t, time.Second, time.Since(start))
		wg.Wait()

		require.ErrorIs(t, waiterErr, ErrCircuitOpen)
		require.ErrorIs(t, waiterErr, context.Canceled)
		var e *Error
		require.ErrorAs(t, waiterErr, &e)
		assert.Equal(t, 1499*time.Millisecond, e.Waited)

		// A call with 1.5 s left meets the 2 s reopening (until 3 s): it
		// does not wait.
		start = time.Now()
		ctx2, cancel2 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel2()
		_, err = pay(t, tr, ctx2, "pay-3")
		require.ErrorIs(t, err, ErrCircuitOpen)
		assert.Zero(t, time.Since(start))
	})
}

// A waiting call stops when the host reopens for longer than the call may
// still wait, and MaxWait bounds a call without a deadline.
func TestWaitStopsAtTheReopening(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &outageHost{}
		tr := NewTransport(Config{Base: host, NoBudget: true, MaxAttempts: 1, MaxWait: 2 * time.Second,
			Breaker: BreakerConfig{ConsecutiveFailures: 1}})
		trip(t, tr, 1)
		var wg sync.WaitGroup
		var waiterErr error
		var waited time.Duration
		wg.Go(func() {
			time.Sleep(time.Millisecond)
			start := time.Now()
			_, waiterErr = pay(t, tr, context.Background(), "pay-2") // MaxWait: until 2.001 s
			waited = time.Since(start)
		})
		_, err := pay(t, tr, context.Background(), "pay-1") // the probe at 1 s fails: open until 3 s
		require.NoError(t, err)
		wg.Wait()
		require.ErrorIs(t, waiterErr, ErrCircuitOpen)
		assert.Equal(t, 999*time.Millisecond, waited, "it stopped at the reopening, not at MaxWait")
		var e *Error
		require.ErrorAs(t, waiterErr, &e)
		assert.Equal(t, "the call waited 999ms, and the host's breaker is open for 2s more, past its wait bound (MaxWait), 1.001s away", e.Detail)
	})
}

// Issue 26, point 2: the open period follows the Retry-After of the failure
// that opened the breaker, clamped to MaxRetryAfter; without one it is 1 s,
// doubled at each reopening up to OpenTimeout.
func TestOpenPeriodFollowsRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		name       string
		retryAfter string
		want       []time.Duration // successive open periods
	}{
		{"Retry-After 3", "3", []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}},
		{"Retry-After 120, clamped", "120", []time.Duration{10 * time.Second, 10 * time.Second}},
		{"none", "", []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				host := &outageHost{retryAfter: tt.retryAfter}
				var mu sync.Mutex
				var opened []time.Time
				tr := NewTransport(Config{Base: host, NoBudget: true, FailFast: true, MaxAttempts: 1, MaxRetryAfter: 10 * time.Second,
					Breaker: BreakerConfig{ConsecutiveFailures: 1},
					Observer: Observer{OnBreakerChange: func(_ string, _, to BreakerState) {
						mu.Lock()
						defer mu.Unlock()
						if to == BreakerOpen {
							opened = append(opened, time.Now())
						}
					}}})
				trip(t, tr, 1)
				for _, period := range tt.want {
					time.Sleep(period - time.Millisecond)
					_, err := pay(t, tr, context.Background(), "early")
					require.ErrorIs(t, err, ErrCircuitOpen, "still open 1 ms before %s", period)
					time.Sleep(time.Millisecond)
					_, err = pay(t, tr, context.Background(), "probe")
					require.NoError(t, err, "the probe goes after %s", period)
				}
				require.Len(t, opened, len(tt.want)+1)
				for i, period := range tt.want {
					assert.Equal(t, period, opened[i+1].Sub(opened[i]), "open period %d", i+1)
				}
			})
		})
	}
}

// Issue 26, point 3: when the probe succeeds, the calls that waited are
// released oldest first at a pace the host sets: one in flight after the
// probe, then one more for each that succeeds, so the number in flight
// doubles every round trip (10 ms here) instead of all 60 at once. The
// attempts are counted at instants of synctest's clock between rounds: at
// the instant a round ends, its attempts end and the next round's start
// in an order the scheduler picks, so a peak taken then mixes the two.
func TestRecoveryReleasesWaitersAtAPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &outageHost{latency: 10 * time.Millisecond}
		tr := NewTransport(Config{Base: host, NoBudget: true, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
		trip(t, tr, 1) // open at 10 ms, until 1.010 s
		host.setUp(true)
		const waiters = 60 // arriving at 11 to 70 ms
		var wg sync.WaitGroup
		var failed atomic.Int32
		for i := range waiters {
			wg.Go(func() {
				time.Sleep(time.Duration(i+1) * time.Millisecond) // they arrive in order
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := pay(t, tr, ctx, "pay-"+strings.Repeat("x", i)); err != nil {
					failed.Add(1)
				}
			})
		}
		// At 1.010 s the open period ends and the oldest goes as the probe;
		// count the attempts in flight per round trip from 1.015 s, midway
		// between the instants at which one round ends and the next starts.
		time.Sleep(time.Second + 5*time.Millisecond)
		inFlight := []int{host.inFlightNow()}
		for host.requests() < 1+waiters {
			time.Sleep(10 * time.Millisecond) // one round trip
			inFlight = append(inFlight, host.inFlightNow())
		}
		wg.Wait()
		assert.Zero(t, failed.Load())
		assert.Equal(t, []int{1, 1, 2, 4, 8, 16, 28}, inFlight, "in flight per round trip: the probe, the first released, then a window that doubles")
		// Released oldest first: each round's requests are the next oldest
		// waiters (they arrive at one instant, in any order among them).
		next := 0
		for _, round := range rounds(host.order[1:]) {
			var want []string
			for i := next; i < next+len(round); i++ {
				want = append(want, "pay-"+strings.Repeat("x", i))
			}
			assert.ElementsMatch(t, want, round, "released oldest first")
			next += len(round)
		}
	})
}

// rounds groups the keys of requests by the instant they arrived.
func rounds(order []arrival) [][]string {
	var out [][]string
	for i, a := range order {
		if i == 0 || !a.at.Equal(order[i-1].at) {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], a.key)
	}
	return out
}

// A probe whose 503 carries Retry-After reopens the breaker for that long;
// the waiting calls that can outlast it wait on and are let through then.
func TestWaitersRideOutSeveralPeriods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &outageHost{retryAfter: "2"}
		tr := NewTransport(Config{Base: host, NoBudget: true, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
		trip(t, tr, 1) // open for 2 s
		go func() {
			time.Sleep(3 * time.Second) // the probe at 2 s fails: open until 4 s; up at 3 s
			host.setUp(true)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		start := time.Now()
		_, err := pay(t, tr, ctx, "pay-1")
		require.NoError(t, err)
		// The call was the probe at 2 s, got a 503 Retry-After: 2 and slept
		// it, then went at 4 s as the next probe and was paid.
		assert.Equal(t, 4*time.Second, time.Since(start))
		assert.Equal(t, 3, host.requests())
		_, err = pay(t, tr, ctx, "pay-2")
		require.NoError(t, err, "closed")
		assert.Equal(t, 4, host.requests())
	})
}

// An attempt that was let through before the breaker opened and ends
// within the open period moves gobreaker to half-open early (its own open
// period is a nanosecond); the Observer hears of half-open only when the
// open period ends and the probe goes.
func TestHalfOpenReportedWhenTheOpenPeriodEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if calls.Add(1) == 1 {
				time.Sleep(100 * time.Millisecond) // in flight when the breaker opens
			}
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody, Request: r}, nil
		})
		var mu sync.Mutex
		var changes []string
		start := time.Now()
		tr := NewTransport(Config{Base: base, NoBudget: true, MaxAttempts: 1, FailFast: true,
			Breaker: BreakerConfig{ConsecutiveFailures: 1},
			Observer: Observer{OnBreakerChange: func(_ string, from, to BreakerState) {
				mu.Lock()
				defer mu.Unlock()
				changes = append(changes, fmt.Sprintf("%s %s->%s", time.Since(start), from, to))
			}}})
		var wg sync.WaitGroup
		wg.Go(func() { pay(t, tr, context.Background(), "slow") })
		time.Sleep(time.Millisecond)
		pay(t, tr, context.Background(), "fast") // opens it at 1 ms, until 1.001 s
		wg.Wait()                                // the slow one ends at 100 ms
		mu.Lock()
		assert.Equal(t, []string{"1ms closed->open"}, changes, "not half-open within the open period")
		mu.Unlock()
		time.Sleep(time.Second)
		pay(t, tr, context.Background(), "probe") // at 1.1 s
		assert.Equal(t, []string{"1ms closed->open", "1.1s open->half-open", "1.1s half-open->open"}, changes)
	})
}
