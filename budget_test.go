package idem

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
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
	assert.True(t, b.allowRetry(), "floor burst 1")
	assert.True(t, b.allowRetry(), "floor burst 2")
	assert.False(t, b.allowRetry(), "floor empty, nothing earned")

	// Two first attempts earn one retry.
	b.firstAttempt()
	assert.False(t, b.allowRetry(), "half a retry earned is not a retry")
	b.firstAttempt()
	assert.True(t, b.allowRetry(), "one earned retry")
	assert.False(t, b.allowRetry())

	// Earnings are capped at MaxEarned.
	for range 100 {
		b.firstAttempt()
	}
	assert.True(t, b.allowRetry())
	assert.True(t, b.allowRetry())
	assert.False(t, b.allowRetry(), "MaxEarned caps what is saved up")

	// The floor refills with time.
	clk.advance(time.Second)
	assert.True(t, b.allowRetry(), "one floor token per second")
	assert.False(t, b.allowRetry())

	assert.Equal(t, BudgetStats{FirstAttempts: 102, Retries: 6, Denied: 5}, b.Stats())
}

func TestBudgetWithoutFloor(t *testing.T) {
	b := newBudget(BudgetConfig{FloorRate: -1}, newFakeClock().now)
	assert.False(t, b.allowRetry(), "no floor, nothing earned")
	for range 10 {
		b.firstAttempt()
	}
	assert.True(t, b.allowRetry(), "ten first attempts at the default 0.1 earn one retry")
	assert.False(t, b.allowRetry())
}

func TestBudgetConcurrentUse(t *testing.T) {
	b := newBudget(BudgetConfig{FloorRate: -1}, newFakeClock().now)
	var wg sync.WaitGroup
	var allowed atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				b.firstAttempt()
				if b.allowRetry() {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	s := b.Stats()
	assert.EqualValues(t, 8000, s.FirstAttempts)
	assert.Equal(t, allowed.Load(), s.Retries)
	assert.LessOrEqual(t, s.Retries, int64(800), "retries <= ratio x first attempts")
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
// (1 + ratio) x operations + the floor's allowance for the window.
func TestOutageBoundedByBudget(t *testing.T) {
	const ops, workers = 200, 20
	window := ops * 10 * time.Millisecond // 2 s on the fake clock
	clk := newFakeClock()
	budget := newBudget(BudgetConfig{}, clk.now)

	requests, errs := outage(t, Config{Budget: budget}, clk, ops, workers)

	floor := DefaultBudgetFloor + DefaultBudgetFloorRate*window.Seconds()
	bound := (1+DefaultBudgetRatio)*ops + floor
	t.Logf("outage with the default budget: %d requests for %d operations over %s: amplification %.2fx (bound %.0f = (1+%.1f) x %d + floor %.0f; without a budget %dx)",
		requests, ops, window, float64(requests)/ops, bound, DefaultBudgetRatio, ops, floor, DefaultMaxAttempts)
	assert.LessOrEqual(t, float64(requests), bound)
	assert.Greater(t, requests, int64(ops), "some retries are allowed")

	s := budget.Stats()
	assert.EqualValues(t, ops, s.FirstAttempts)
	assert.Equal(t, requests-ops, s.Retries, "every request beyond the first attempts took a token")
	denied := 0
	for _, err := range errs {
		if errors.Is(err, ErrBudgetExhausted) {
			denied++
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, http.StatusServiceUnavailable, e.Status, "the denial carries the last status")
			assert.Contains(t, err.Error(), "local decision")
		}
	}
	assert.EqualValues(t, s.Denied, denied, "every denial ends its call with ErrBudgetExhausted")
	assert.Positive(t, denied)
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

// A denied retry ends the call at once and is reported to the Observer.
func TestBudgetDenialReported(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool { w.WriteHeader(http.StatusBadGateway); return true }}
	srv := a.start(t)
	budget := newBudget(BudgetConfig{FloorRate: -1}, newFakeClock().now)
	tr, clk := newTestTransport(t, Config{Budget: budget})
	var gaveUp error
	tr.cfg.Observer.OnGiveUp = func(_ Attempt, err error) { gaveUp = err }
	_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.ErrorIs(t, err, ErrBudgetExhausted)
	assert.Equal(t, err, gaveUp)
	assert.Empty(t, clk.Waits(), "no wait for a denied retry")
	assert.EqualValues(t, 1, a.requests.Load())
	assert.EqualValues(t, 1, budget.Stats().Denied)
}

// One Budget shared by two Transports spends from one bucket.
func TestBudgetSharedByTransports(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool { w.WriteHeader(http.StatusServiceUnavailable); return true }}
	srv := a.start(t)
	budget := newBudget(BudgetConfig{FloorRate: -1}, newFakeClock().now)
	t1, _ := newTestTransport(t, Config{Budget: budget, MaxAttempts: 2, Breaker: BreakerConfig{Disabled: true}})
	t2, _ := newTestTransport(t, Config{Budget: budget, MaxAttempts: 2, Breaker: BreakerConfig{Disabled: true}})
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
	assert.EqualValues(t, 20, s.FirstAttempts)
	assert.EqualValues(t, 2, s.Retries, "20 first attempts across both earn 2 retries")
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
	tr, _ := newTestTransport(t, Config{Budget: budget})
	_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.ErrorIs(t, err, ErrBudgetExhausted)
	assert.EqualValues(t, 2, a.requests.Load(), "one floor token: one retry")
	assert.Equal(t, BudgetStats{FirstAttempts: 1, Retries: 1, Denied: 1}, budget.Stats())
}
