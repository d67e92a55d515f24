package adaptertest

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// answer is one response of the API.
type answer struct {
	status   int
	body     string
	replayed bool
}

// pay sends one keyed payment from account to the API at url, without
// retries.
func pay(url, account, key string) (answer, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/accounts/"+account+"/payments",
		strings.NewReader(`{"amount_cents": 100, "reference": "hazard"}`))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer acme:alice")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b), replayed: resp.Header.Get("Idempotent-Replayed") == "true"}, err
}

// mustPay is pay that fails t on a transport error.
func mustPay(t *testing.T, url, account, key string) answer {
	t.Helper()
	got, err := pay(url, account, key)
	require.NoError(t, err)
	return got
}

// ErrorNotStored: a payment whose handler made its effect and then
// returned an error the framework renders (503) answers the client with
// that rendering, keeps no effect (Transactional) and stores nothing, so
// that its retry with the same key runs the handler and makes the payment.
// In Leased mode the effect of the failed attempt stays (it left the
// database), and the retry runs too.
func ErrorNotStored(t *testing.T, build Build, wantBody string) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			a := start(t, build, server.Config{Mode: m.mode})
			key := uuid.NewString()
			a.app.FailNext(1)
			got := mustPay(t, a.url, "err", key)
			assert.Equal(t, http.StatusServiceUnavailable, got.status, "the framework's rendering of the error: %s", got.body)
			assert.Contains(t, got.body, wantBody, "the framework's rendering of the error")
			failed := 0
			if m.mode == server.Transactional {
				assert.Zero(t, a.count(t, "err"), "the failed attempt's effect rolled back")
			} else {
				failed = 1
			}
			got = mustPay(t, a.url, "err", key)
			assert.Equal(t, http.StatusCreated, got.status, "the retry ran the handler: %s", got.body)
			assert.False(t, got.replayed, "the retry is no replay of the failure")
			assert.Equal(t, failed+1, a.count(t, "err"), "payments after the retry")
			again := mustPay(t, a.url, "err", key)
			assert.True(t, again.replayed, "the success is stored")
			assert.Equal(t, got.body, again.body)
		})
	}
}

// Duplicates: n concurrent requests with one key make one payment, and
// every one of them that got a 2xx got the same body.
func Duplicates(t *testing.T, build Build, n int) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			a := start(t, build, server.Config{Mode: m.mode})
			key := uuid.NewString()
			answers := make([]answer, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { answers[i], errs[i] = pay(a.url, "dup", key) })
			}
			wg.Wait()
			var bodies []string
			for i, got := range answers {
				require.NoError(t, errs[i])
				switch {
				case got.status == http.StatusCreated:
					bodies = append(bodies, got.body)
				case got.status != http.StatusConflict:
					t.Errorf("duplicate %d: %d %s, want 201 or 409 key-in-flight", i, got.status, got.body)
				}
			}
			assert.Equal(t, 1, a.count(t, "dup"), "payments made by %d duplicates", n)
			require.NotEmpty(t, bodies, "no duplicate got the payment")
			for _, b := range bodies {
				assert.Equal(t, bodies[0], b, "every 201 is the one payment")
			}
		})
	}
}
