package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 41, point 3: a retry that its host's breaker refuses was not sent,
// so it spends no token: the token it took goes back to its host.
func TestRefusedRetrySpendsNoToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &fakeHost{}
		host.status.Store(http.StatusCreated)
		budget := NewBudget(BudgetConfig{Ratio: 1, FloorRate: -1}) // one retry per answer, no floor
		tr := NewTransport(Config{Base: host, Budget: budget, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
		tr.rand = func() float64 { return 0.5 } // a backoff of 50 ms
		resp, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/pay", `{}`))
		require.NoError(t, err)
		discard(resp) // earns one retry

		host.status.Store(http.StatusServiceUnavailable)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		// The 503 opens the breaker for 1 s; the retry takes the token,
		// and after its backoff the breaker refuses it: its deadline
		// comes first.
		_, err = tr.RoundTrip(post(t, WithKey(ctx, "k1"), "http://api.test/pay", `{}`))
		require.ErrorIs(t, err, ErrCircuitOpen)
		assert.EqualValues(t, 2, host.requests.Load(), "the retry was not sent")
		assert.Equal(t, BudgetStats{Answered: 1, Retries: 1, Returned: 1}, budget.Stats())
		_, ok := budget.allowRetry("http://api.test:80")
		assert.True(t, ok, "the token is back for the host's next retry")
	})
}

// Issue 41, point 3: one host's outage cannot starve another's retries.
// Behind one client and one Budget, host a is dead (every attempt 503) and
// host b fails the first attempt of each call and answers its retry. The
// retries to a are many; b's answers fund b's retries alone, so every
// call to b succeeds, and a's retries are denied (no floor here).
func TestDeadHostCannotSpendAnotherHostsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{} // attempts per key
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			key := r.Header.Get(KeyHeader)
			seen[key]++
			n := seen[key]
			mu.Unlock()
			status := http.StatusCreated
			if r.URL.Host == "a.test" || n == 1 && key != "" && key[0] == 'b' {
				status = http.StatusServiceUnavailable
			}
			return &http.Response{StatusCode: status, Body: http.NoBody, Request: r}, nil
		})
		budget := NewBudget(BudgetConfig{FloorRate: -1})
		tr := NewTransport(Config{Base: base, Budget: budget, FailFast: true, MaxAttempts: 2,
			Breaker: BreakerConfig{Disabled: true}})
		tr.rand = func() float64 { return 0.5 }
		call := func(url, key string) error {
			resp, err := tr.RoundTrip(post(t, WithKey(context.Background(), key), url, `{}`))
			if err == nil {
				discard(resp)
				if resp.StatusCode != http.StatusCreated {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			return err
		}
		for i := range 5 { // b earns ten retries
			require.NoError(t, call("http://b.test/pay", fmt.Sprintf("warm-%d", i)))
		}
		var bFailed, aDenied int
		for i := range 20 {
			for j := range 3 {
				if err := call("http://a.test/pay", fmt.Sprintf("a-%d-%d", i, j)); errors.Is(err, ErrBudgetExhausted) {
					aDenied++
				}
			}
			if err := call("http://b.test/pay", fmt.Sprintf("b-%d", i)); err != nil {
				bFailed++
			}
		}
		assert.Zero(t, bFailed, "every call to the healthy host had its retry")
		assert.Equal(t, 60, aDenied, "the dead host's retries found nothing it earned")
	})
}
