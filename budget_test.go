package idem

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a clock that moves only when told to. Safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestBudgetAccounting(t *testing.T) {
	clk := newFakeClock()
	b := newBudget(BudgetConfig{Ratio: 0.5, MaxEarned: 2, FloorRate: 1, FloorBurst: 2}, clk.now)

	// The floor's burst first: nothing earned yet.
	assert.True(t, b.allow(), "floor burst 1")
	assert.True(t, b.allow(), "floor burst 2")
	assert.False(t, b.allow(), "floor empty, nothing earned")

	// Two answered attempts earn one retry.
	b.answered("")
	assert.False(t, b.allow(), "half a retry earned is not a retry")
	b.answered("")
	assert.True(t, b.allow(), "one earned retry")
	assert.False(t, b.allow())

	// Earnings are capped at MaxEarned.
	for range 100 {
		b.answered("")
	}
	assert.True(t, b.allow())
	assert.True(t, b.allow())
	assert.False(t, b.allow(), "MaxEarned caps what is saved up")

	// The floor refills with time.
	clk.advance(time.Second)
	assert.True(t, b.allow(), "one floor token per second")
	assert.False(t, b.allow())

	assert.Equal(t, BudgetStats{Answered: 102, Retries: 6, Denied: 5}, b.Stats())
}

func TestBudgetWithoutFloor(t *testing.T) {
	b := newBudget(BudgetConfig{FloorRate: -1}, newFakeClock().now)
	assert.False(t, b.allow(), "no floor, nothing earned")
	b.answered("")
	assert.True(t, b.allow(), "an answered attempt at the default ratio of 2 earns two retries")
	assert.True(t, b.allow())
	assert.False(t, b.allow())
}

func TestBudgetConcurrentUse(t *testing.T) {
	b := newBudget(BudgetConfig{Ratio: 0.1, FloorRate: -1}, newFakeClock().now)
	var wg sync.WaitGroup
	var allowed atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				b.answered("")
				if b.allow() {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	s := b.Stats()
	assert.EqualValues(t, 8000, s.Answered)
	assert.Equal(t, allowed.Load(), s.Retries)
	assert.LessOrEqual(t, s.Retries, int64(800), "retries <= ratio x answered attempts")
	assert.EqualValues(t, 8000, s.Retries+s.Denied)
}

// outage runs ops logical POSTs from workers goroutines against a server
// that answers 503 to everything, with the clock moving 10 ms per operation
// (ops x 10 ms in all), and returns the requests that reached the server.
func outage(t *testing.T, cfg Config, clk *fakeClock, ops, workers int) (requests int64, errs []error) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	cfg.Breaker.Disabled = true // the budget alone is under test
	tr, _ := newTestTransport(t, cfg)
	tr.now = clk.now

	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				clk.advance(10 * time.Millisecond)
				resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
				if err == nil {
					discard(resp)
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	for i := range ops {
		work <- i
	}
	close(work)
	wg.Wait()
	return hits.Load(), errs
}

// Acceptance 1 (issue 3): in a full outage the budget holds the requests to
// the operations + the floor's allowance for the window: nothing is
// answered, so nothing is earned. The calls are fail-fast, so that each
// denial ends its call at once on the fake clock
// (TestOutageBoundedByBudgetWhileWaiting waits).
func TestOutageBoundedByBudget(t *testing.T) {
	const ops, workers = 200, 20
	window := ops * 10 * time.Millisecond // 2 s on the fake clock
	clk := newFakeClock()
	budget := newBudget(BudgetConfig{}, clk.now)

	requests, errs := outage(t, Config{Budget: budget, FailFast: true}, clk, ops, workers)

	floor := defaultBudgetFloor + defaultBudgetFloorRate*window.Seconds()
	bound := ops + floor
	t.Logf("outage with the default budget: %d requests for %d operations over %s: amplification %.2fx (bound %.0f = %d + floor %.0f; without a budget %dx)",
		requests, ops, window, float64(requests)/ops, bound, ops, floor, DefaultMaxAttempts)
	assert.LessOrEqual(t, float64(requests), bound)
	assert.Greater(t, requests, int64(ops), "some retries are allowed")

	s := budget.Stats()
	assert.Zero(t, s.Answered, "a 503 earns nothing")
	assert.Equal(t, requests-ops, s.Retries, "every request beyond the first attempts took a token")
	denied := 0
	for _, err := range errs {
		if errors.Is(err, ErrBudgetExhausted) {
			denied++
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, http.StatusServiceUnavailable, e.Status, "the denial carries the last status")
			assert.Contains(t, err.Error(), "local decision")
			assert.Contains(t, e.Detail, "fail-fast")
		}
	}
	assert.EqualValues(t, s.Denied, denied, "every denial ends its call with ErrBudgetExhausted")
	assert.Positive(t, denied)
}

// In a full outage, calls that wait for a token send no more than the
// fail-fast ones: the waiting retries are served by the floor alone, and
// the calls whose deadline comes first fail with ErrBudgetExhausted, having
// waited. (synctest's clock: 100 calls, one every 10 ms, 2 s deadlines.)
func TestOutageBoundedByBudgetWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &fakeHost{}
		host.status.Store(http.StatusServiceUnavailable)
		budget := NewBudget(BudgetConfig{})
		tr := NewTransport(Config{Base: host, Budget: budget, Breaker: BreakerConfig{Disabled: true}})
		const ops = 100
		errs := make([]error, ops)
		start := time.Now()
		var wg sync.WaitGroup
		for i := range ops {
			time.Sleep(10 * time.Millisecond)
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, errs[i] = tr.RoundTrip(post(t, ctx, "http://api.test/pay", `{}`))
			})
		}
		wg.Wait()
		window := time.Since(start)
		floor := defaultBudgetFloor + defaultBudgetFloorRate*window.Seconds()
		requests := host.requests.Load()
		assert.LessOrEqual(t, float64(requests), ops+floor, "the floor alone serves the retries (%s)", window)
		s := budget.Stats()
		assert.Equal(t, int64(requests)-ops, s.Retries)
		assert.Positive(t, s.Waited, "retries waited for the floor")
		waitedInVain := 0
		for _, err := range errs {
			var e *Error
			if errors.As(err, &e) && errors.Is(err, ErrBudgetExhausted) {
				waitedInVain++
				assert.Positive(t, e.Waited, "it waited before it gave up: %v", err)
				assert.Contains(t, e.Detail, "waited")
			}
		}
		assert.Positive(t, waitedInVain)
	})
}

// Acceptance 2 (issue 3): the same outage without a budget sends MaxAttempts
// requests per operation.
func TestOutageWithoutBudget(t *testing.T) {
	const ops, workers = 200, 20
	requests, errs := outage(t, Config{NoBudget: true}, newFakeClock(), ops, workers)
	t.Logf("outage without a budget: %d requests for %d operations: amplification %.2fx",
		requests, ops, float64(requests)/ops)
	assert.EqualValues(t, DefaultMaxAttempts*ops, requests)
	for _, err := range errs {
		assert.ErrorIs(t, err, ErrAttemptsExhausted, "exhausted on 503s: the outcome is unknown")
	}
}

// A retry denied to a fail-fast call ends the call at once and is reported
// to the Observer.
func TestBudgetDenialReported(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool { w.WriteHeader(http.StatusBadGateway); return true }}
	srv := a.start(t)
	budget := newBudget(BudgetConfig{FloorRate: -1}, newFakeClock().now)
	tr, clk := newTestTransport(t, Config{Budget: budget, FailFast: true})
	var gaveUp error
	tr.cfg.Observer.OnGiveUp = func(_ Attempt, err error) { gaveUp = err }
	_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.ErrorIs(t, err, ErrBudgetExhausted)
	assert.Equal(t, err, gaveUp)
	assert.Empty(t, clk.Waits(), "no wait for a denied retry")
	assert.EqualValues(t, 1, a.requests.Load())
	assert.EqualValues(t, 1, budget.Stats().Denied)
}

// One Budget shared by two Transports spends from one bucket: what the
// answers to one earned, the other's retries spend.
func TestBudgetSharedByTransports(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool {
		if n <= 2 {
			return false // answered: 201
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	}}
	srv := a.start(t)
	budget := newBudget(BudgetConfig{FloorRate: -1}, newFakeClock().now)
	cfg := Config{Budget: budget, MaxAttempts: 2, FailFast: true, Breaker: BreakerConfig{Disabled: true}}
	t1, _ := newTestTransport(t, cfg)
	t2, _ := newTestTransport(t, cfg)
	for i := range 20 {
		tr := t1
		if i%2 == 1 {
			tr = t2
		}
		resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
		if err == nil {
			discard(resp)
		}
	}
	s := budget.Stats()
	assert.EqualValues(t, 2, s.Answered, "one answer through each")
	assert.EqualValues(t, 4, s.Retries, "two answers across both earn 4 retries")
	assert.EqualValues(t, 14, s.Denied)
}

// A 409 key-in-flight wait spends from the budget like any retry.
func TestKeyInFlightSpendsBudget(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool {
		w.Header().Set("Retry-After", "1")
		writeProblem(w, 409, "key-in-flight")
		return true
	}}
	srv := a.start(t)
	budget := newBudget(BudgetConfig{FloorRate: 1, FloorBurst: 1}, newFakeClock().now)
	tr, _ := newTestTransport(t, Config{Budget: budget, FailFast: true})
	_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.ErrorIs(t, err, ErrBudgetExhausted)
	assert.EqualValues(t, 2, a.requests.Load(), "one floor token: one retry")
	assert.Equal(t, BudgetStats{Retries: 1, Denied: 1}, budget.Stats(), "a 409 key-in-flight earns nothing")
}

// Issue 26, point 4: a retry without a token waits for one instead of
// failing, and the answer of another call earns it: when a service
// recovers, its answers release the waiting retries, one for one.
func TestBudgetRetryWaitsForAnEarnedToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var requests atomic.Int32
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			status := http.StatusCreated
			if requests.Add(1) == 1 {
				status = http.StatusServiceUnavailable // the first call's first attempt
			}
			return &http.Response{StatusCode: status, Body: http.NoBody, Request: r}, nil
		})
		budget := NewBudget(BudgetConfig{FloorRate: -1}) // nothing saved, no floor
		tr := NewTransport(Config{Base: base, Budget: budget, Breaker: BreakerConfig{Disabled: true}})
		tr.rand = func() float64 { return 0.5 } // a backoff of 50 ms
		go func() {
			time.Sleep(time.Second)
			resp, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/other", `{}`))
			if err == nil {
				discard(resp)
			}
		}()
		start := time.Now()
		resp, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/pay", `{}`))
		require.NoError(t, err)
		discard(resp)
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, time.Second+50*time.Millisecond, time.Since(start), "the other call's answer at 1 s earned the token; then the backoff")
		assert.Equal(t, BudgetStats{Answered: 2, Retries: 1, Waited: 1}, budget.Stats())
	})
}

// Earned tokens go to the retries that waited longest first, and the floor
// serves the others in the order they asked; a token earned for a retry
// that held a floor reservation gives the reservation back.
func TestBudgetWaitersServedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(BudgetConfig{FloorRate: 1, FloorBurst: 1})
		require.True(t, b.allow(), "the floor's burst")
		policy := func() waitPolicy { return waitPolicy{newTimer: time.NewTimer} }
		start := time.Now()
		granted := make([]time.Duration, 3)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				time.Sleep(time.Duration(i+1) * time.Millisecond)
				_, _, err := b.wait(context.Background(), "", policy)
				assert.Nil(t, err)
				granted[i] = time.Since(start)
			})
		}
		// The floor reserves its tokens at 1 s, 2 s and 3 s for the three.
		// An answer at 500 ms earns two tokens, for the two oldest, whose
		// reservations go back to the floor; the third keeps its own
		// (x/time/rate does not move a reservation).
		time.Sleep(500 * time.Millisecond)
		b.answered("")
		wg.Wait()
		assert.Equal(t, []time.Duration{500 * time.Millisecond, 500 * time.Millisecond, 3 * time.Second}, granted)
		assert.Equal(t, BudgetStats{Answered: 1, Retries: 4, Waited: 3}, b.Stats())
	})
}

// A retry that no token reaches in time stops waiting when the deadline,
// less the wait that must follow it, comes: it could not be sent after.
func TestBudgetWaitEndsBeforeTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &fakeHost{}
		host.status.Store(http.StatusServiceUnavailable)
		budget := NewBudget(BudgetConfig{FloorRate: -1})
		tr := NewTransport(Config{Base: host, Budget: budget, Breaker: BreakerConfig{Disabled: true}})
		tr.rand = func() float64 { return 0.5 } // a backoff of 50 ms
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		_, err := tr.RoundTrip(post(t, ctx, "http://api.test/pay", `{}`))
		require.ErrorIs(t, err, ErrBudgetExhausted)
		assert.Equal(t, 1950*time.Millisecond, time.Since(start))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, 1950*time.Millisecond, e.Waited)
		assert.Equal(t, "the retry waited 1.95s for a token of the retry budget until the context's deadline less the wait of 50ms before the retry", e.Detail)
		assert.True(t, e.MayHaveTakenEffect, "the 503 may have acted")
		assert.Equal(t, http.StatusServiceUnavailable, e.Status)
		assert.EqualValues(t, 1, host.requests.Load())
	})
}

// allow takes a token for a retry to the host "" that does not wait.
func (b *Budget) allow() bool {
	_, ok := b.allowRetry("")
	return ok
}
