package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 41, point 1: under a deep line of waiting calls, the oldest has a
// moment of its deadline left when the open period ends. It must not be
// the probe (it would be cut by its own deadline before the host answers,
// not counted, and the next oldest would follow, each in turn): the probe
// goes to the oldest call whose deadline covers it. Then the calls that
// can no longer be answered in time leave the line, unsent, and nothing
// is sent that its caller cannot wait for.
func TestProbeGoesToACallThatCanWaitForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &outageHost{latency: 10 * time.Millisecond}
		tr := NewTransport(Config{Base: host, NoBudget: true, MaxAttempts: 1, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
		trip(t, tr, 1) // open from 10 ms until 1.010 s; a probe is bounded by 1 s
		host.setUp(true)
		const short = 40
		var wg sync.WaitGroup
		var ok, cut, unsent atomic.Int32
		call := func(key string, arrive, deadline time.Duration) {
			wg.Go(func() {
				time.Sleep(arrive)
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				_, err := pay(t, tr, ctx, key)
				var e *Error
				switch {
				case err == nil:
					ok.Add(1)
				case errors.As(err, &e) && e.Attempts == 0:
					unsent.Add(1)
				default:
					cut.Add(1)
				}
			})
		}
		// The line: calls whose deadlines end 1 ms apart just after the
		// open period, then one with time to spare.
		for i := range short {
			call(fmt.Sprintf("short-%02d", i), time.Duration(i+1)*time.Millisecond, time.Second+time.Duration(i+1)*time.Millisecond)
		}
		call("spare", 500*time.Millisecond, 5*time.Second)
		wg.Wait()
		require.Greater(t, host.requests(), 1)
		assert.Equal(t, "spare", host.order[1].key, "the probe is the call whose deadline covers it")
		assert.Zero(t, cut.Load(), "no attempt was sent that its caller's deadline cut")
		assert.Positive(t, ok.Load()-1, "the calls released after the probe that could be answered were")
		assert.Equal(t, int32(short+1), ok.Load()+unsent.Load())
	})
}

// hangingHost answers 201 at once, except its first request, which hangs
// until its context ends or 20 s pass.
type hangingHost struct{ n atomic.Int32 }

func (h *hangingHost) RoundTrip(r *http.Request) (*http.Response, error) {
	discard(&http.Response{Body: r.Body})
	if h.n.Add(1) == 1 {
		select {
		case <-time.After(20 * time.Second):
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// Issue 41, point 2: a probe that hangs must not shut its host out. It is
// bounded by default (the open period, 1 s here); past it, it counts as a
// failure, the breaker opens again, and the next probe goes. Calls with 3 s
// deadlines arriving while the first probe hangs (it has no deadline of its
// own) then succeed.
func TestHungProbeDoesNotShutTheHostOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &outageHost{}
		hang := &hangingHost{}
		var up atomic.Bool
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if up.Load() {
				return hang.RoundTrip(r)
			}
			return host.RoundTrip(r)
		})
		var mu sync.Mutex
		var changes []string
		start := time.Now()
		tr := NewTransport(Config{Base: base, NoBudget: true, Breaker: BreakerConfig{ConsecutiveFailures: 1},
			Observer: Observer{OnBreakerChange: func(_ string, from, to BreakerState) {
				mu.Lock()
				defer mu.Unlock()
				changes = append(changes, fmt.Sprintf("%s %s->%s", time.Since(start), from, to))
			}}})
		trip(t, tr, 1) // open until 1 s
		up.Store(true)
		var wg sync.WaitGroup
		wg.Go(func() { pay(t, tr, context.Background(), "patient") }) // the probe at 1 s; it hangs
		var ok atomic.Int32
		const calls = 30
		for i := range calls {
			wg.Go(func() {
				time.Sleep(time.Duration(i+1) * 100 * time.Millisecond)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				if _, err := pay(t, tr, ctx, fmt.Sprintf("pay-%d", i)); err == nil {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.GreaterOrEqual(t, len(changes), 3)
		assert.Equal(t, []string{"0s closed->open", "1s open->half-open", "2s half-open->open"}, changes[:3],
			"the hung probe counted as a failure at its 1 s bound")
		// Open again until 4 s (the period doubles): the calls whose
		// deadline comes before then (those that arrived before 1 s) fail.
		assert.GreaterOrEqual(t, ok.Load(), int32(calls-10), "the calls that could wait for the next probe succeeded")
	})
}

// Issue 41, point 4: a call whose deadline ends while it waits for its
// host always matches context.DeadlineExceeded, whichever of its wait's
// timer and its context saw the deadline first (here they see it at the
// same instant of synctest's clock).
func TestWaitEndedByTheDeadlineMatchesDeadlineExceeded(t *testing.T) {
	for i := range 50 {
		synctest.Test(t, func(t *testing.T) {
			host := &outageHost{latency: 500 * time.Millisecond}
			tr := NewTransport(Config{Base: host, NoBudget: true, MaxAttempts: 1, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
			trip(t, tr, 1) // open from 500 ms until 1.5 s
			var wg sync.WaitGroup
			wg.Go(func() { pay(t, tr, context.Background(), "probe") }) // in flight from 1.5 s to 2 s
			time.Sleep(time.Second + 100*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond) // ends at 1.9 s, while it waits
			defer cancel()
			_, err := pay(t, tr, ctx, "late")
			require.ErrorIs(t, err, ErrCircuitOpen, "round %d", i)
			require.ErrorIs(t, err, context.DeadlineExceeded, "round %d: %v", i, err)
			wg.Wait()
		})
	}
}

// Issue 41, point 1: a recovery's window grows by one per success (it
// doubles every round trip) until a released attempt fails, which halves
// it; from then on it grows by one per window of successes, so that a
// released backlog probes the host's limit once instead of refilling its
// queue every few round trips (TCP's congestion avoidance).
func TestRecoveryWindowAfterAFailure(t *testing.T) {
	h := &hostBreaker{window: 8}
	for range 8 {
		h.pace(nil)
	}
	assert.Equal(t, 16, h.window, "one more per success before a failure")
	h.pace(errAttemptFailed)
	assert.Equal(t, 8, h.window, "halved")
	var grew []int
	for range 17 {
		h.pace(nil)
		grew = append(grew, h.window)
	}
	assert.Equal(t, []int{8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 10}, grew, "one more per window of successes")
	h.pace(errAttemptExcluded)
	assert.Equal(t, 10, h.window, "an attempt that says nothing of the host changes nothing")
}

// A probe's bound doubles after a probe that ran into it, up to
// OpenTimeout: a host that says Retry-After: 1 and answers in 1.5 s is
// probed with 1 s, then 2 s, and closes, instead of being kept out by
// probes cut before it can answer.
func TestProbeBoundGrowsForASlowHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var up atomic.Bool
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"1"}},
				Body: http.NoBody, Request: r}
			if up.Load() {
				select { // a slow host that answers in 1.5 s, unless the attempt ends first
				case <-time.After(1500 * time.Millisecond):
					resp.StatusCode, resp.Header = http.StatusCreated, http.Header{}
				case <-r.Context().Done():
					return nil, r.Context().Err()
				}
			}
			return resp, nil
		})
		tr := NewTransport(Config{Base: base, NoBudget: true, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
		tr.rand = func() float64 { return 0 } // no backoff before the retry
		trip(t, tr, 1)                        // open for 1 s (Retry-After)
		up.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		_, err := pay(t, tr, ctx, "pay-1")
		require.NoError(t, err, "the host answers the second probe")
		// The probe at 1 s runs into its 1 s bound at 2 s and reopens the
		// breaker for 1 s; the next, at 3 s, has 2 s and is answered at
		// 4.5 s.
		assert.Equal(t, 4500*time.Millisecond, time.Since(start))
		assert.Equal(t, BreakerClosed, tr.breakers.get("http://api.test:80").State())
	})
}
