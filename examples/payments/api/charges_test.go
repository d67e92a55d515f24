package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

const charge3000 = `{"account_id":"acc-1","amount_cents":3000,"currency":"EUR"}`

func TestChargeIsMadeOnceAndReplayed(t *testing.T) {
	for _, backend := range apiBackends {
		t.Run(backend, func(t *testing.T) {
			gw, url := newGatewayServer(t)
			cfg := newConfig(t, backend)
			cfg.GatewayURL, cfg.GatewayClient = url, fastGatewayClient()
			h := New(cfg)
			putAccount(t, h, "acc-1", 1000)

			first := do(t, h, call{method: "POST", path: "/v1/charges", key: "c-1", body: charge3000})
			require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
			var ch Charge
			require.NoError(t, json.Unmarshal(first.Body.Bytes(), &ch))
			assert.Equal(t, Charge{ID: ch.ID, AccountID: "acc-1", AmountCents: 3000, Currency: "EUR",
				BalanceCents: 4000, GatewayChargeID: ch.GatewayChargeID}, ch)
			assert.NotEmpty(t, ch.GatewayChargeID)

			retry := do(t, h, call{method: "POST", path: "/v1/charges", key: "c-1", body: charge3000})
			assert.Equal(t, "true", retry.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, first.Body.String(), retry.Body.String())
			assert.Equal(t, GatewayStats{Charges: 1, AmountCents: 3000}, gw.Stats())
			assert.Equal(t, int64(4000), getAccount(t, h, "acc-1").BalanceCents)
		})
	}
}

func TestChargeRefusals(t *testing.T) {
	gw, url := newGatewayServer(t)
	h := New(Config{GatewayURL: url, GatewayClient: fastGatewayClient(), Logger: quietLogger()})
	putAccount(t, h, "acc-1", 0)
	cases := []struct {
		name, key, body string
		status          int
		problem         string
	}{
		{"no key", "", charge3000, http.StatusBadRequest, "key-missing"},
		{"reference is not a charge field", "c-ref", `{"account_id":"acc-1","amount_cents":1,"currency":"EUR","reference":"x"}`, http.StatusBadRequest, "invalid-request"},
		{"unknown account", "c-404", `{"account_id":"acc-404","amount_cents":1,"currency":"EUR"}`, http.StatusBadRequest, "invalid-request"},
		{"other currency", "c-usd", `{"account_id":"acc-1","amount_cents":1,"currency":"USD"}`, http.StatusBadRequest, "invalid-request"},
		{"declined", "c-big", `{"account_id":"acc-1","amount_cents":2000000,"currency":"EUR"}`, http.StatusPaymentRequired, "card-declined"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := do(t, h, call{method: "POST", path: "/v1/charges", key: c.key, body: c.body})
			assert.Equal(t, c.status, rec.Code, rec.Body.String())
			assert.Equal(t, c.problem, problemName(rec))
		})
	}
	// A decline is the operation's outcome: stored, and replayed without
	// asking the gateway again.
	rec := do(t, h, call{method: "POST", path: "/v1/charges", key: "c-big", body: cases[4].body})
	assert.Equal(t, "true", rec.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, GatewayStats{}, gw.Stats())
	assert.Equal(t, int64(0), getAccount(t, h, "acc-1").BalanceCents)
}

// errCrash stands for the death of the process: a panic ends the attempt
// where it is, and the middleware ends its lease at once (a real crash
// leaves the lease to expire; the server tests do that with processes).
type errCrash string

func TestChargeTakeoverNeverChargesTwice(t *testing.T) {
	for _, backend := range apiBackends {
		for _, crashAt := range []string{StepGatewayCalled, StepGatewayAnswered, StepRecorded} {
			t.Run(backend+"/"+crashAt, func(t *testing.T) {
				gw, url := newGatewayServer(t)
				cfg := newConfig(t, backend)
				cfg.GatewayURL, cfg.GatewayClient = url, fastGatewayClient()
				var armed atomic.Bool
				armed.Store(true)
				cfg.OnStep = func(_ context.Context, step string) {
					if step == crashAt && armed.CompareAndSwap(true, false) {
						panic(errCrash(step))
					}
				}
				h := New(cfg)
				putAccount(t, h, "acc-1", 1000)

				require.PanicsWithValue(t, errCrash(crashAt), func() {
					do(t, h, call{method: "POST", path: "/v1/charges", key: "c-crash", body: charge3000})
				})
				rec := do(t, h, call{method: "POST", path: "/v1/charges", key: "c-crash", body: charge3000})
				require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
				assert.Empty(t, rec.Header().Get("Idempotent-Replayed"), "a takeover runs the handler")
				assert.Equal(t, GatewayStats{Charges: 1, AmountCents: 3000}, gw.Stats())
				assert.Equal(t, int64(4000), getAccount(t, h, "acc-1").BalanceCents, "credited once")
			})
		}
	}
}

func TestChargeRetriesTheGatewayWithTheSameKey(t *testing.T) {
	gw := NewGateway(GatewayConfig{Logger: quietLogger()})
	var down atomic.Bool
	down.Store(true)
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key")) // one request at a time
		if down.Load() {
			gw.ServeHTTP(httptest.NewRecorder(), r)                  // it charges...
			http.Error(w, "lost at 10.9.8.7", http.StatusBadGateway) // ...but the answer is lost
			return
		}
		gw.ServeHTTP(w, r)
	}))
	defer srv.Close()
	h := New(Config{GatewayURL: srv.URL, GatewayClient: idem.NewClient(idem.Config{MaxAttempts: 1}), Logger: quietLogger()})
	putAccount(t, h, "acc-1", 0)

	rec := do(t, h, call{method: "POST", path: "/v1/charges", key: "c-502", body: charge3000})
	require.Equal(t, http.StatusBadGateway, rec.Code, rec.Body.String())
	assert.Equal(t, "gateway-unavailable", problemName(rec))
	assert.NotContains(t, rec.Body.String(), "10.9.8.7", "the gateway's error is logged, not sent")

	down.Store(false)
	rec = do(t, h, call{method: "POST", path: "/v1/charges", key: "c-502", body: charge3000})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	assert.Equal(t, GatewayStats{Charges: 1, AmountCents: 3000}, gw.Stats())
	require.Len(t, keys, 2)
	assert.Equal(t, keys[0], keys[1], "the takeover resent the same downstream key")
	assert.Equal(t, int64(3000), getAccount(t, h, "acc-1").BalanceCents)
}

func TestDownstreamKeysDifferByScope(t *testing.T) {
	a := downstreamKey(caller{"acme", "alice"}, "k")
	assert.Equal(t, a, downstreamKey(caller{"acme", "alice"}, "k"))
	for _, other := range []string{
		downstreamKey(caller{"acme", "bob"}, "k"),
		downstreamKey(caller{"globex", "alice"}, "k"),
		downstreamKey(caller{"acme", "alice"}, "k2"),
	} {
		assert.NotEqual(t, a, other)
	}
}

// recordFailsOnce is a MemoryBackend whose first RecordCharge fails with a
// business error, as when the account changed after the handler checked
// it and the gateway charged the card.
type recordFailsOnce struct {
	*MemoryBackend
	failed atomic.Bool
}

func (b *recordFailsOnce) RecordCharge(ctx context.Context, c Charge) (Charge, error) {
	if b.failed.CompareAndSwap(false, true) {
		return Charge{}, ErrCurrencyMismatch
	}
	return b.MemoryBackend.RecordCharge(ctx, c)
}

// Once the gateway charged the card, every error is a 5xx, never a
// refusal: the client learns that the outcome is unknown and retries, and
// the retry records the charge once.
func TestChargeErrorAfterTheGatewayChargedIsA5xx(t *testing.T) {
	gw, url := newGatewayServer(t)
	backend := &recordFailsOnce{MemoryBackend: NewMemoryBackend()}
	h := New(Config{Backend: backend, GatewayURL: url, GatewayClient: fastGatewayClient(), Logger: quietLogger()})
	putAccount(t, h, "acc-1", 1000)

	rec := do(t, h, call{method: "POST", path: "/v1/charges", key: "c-late", body: charge3000})
	assert.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
	require.Equal(t, GatewayStats{Charges: 1, AmountCents: 3000}, gw.Stats(), "the card was charged")

	rec = do(t, h, call{method: "POST", path: "/v1/charges", key: "c-late", body: charge3000})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	assert.Equal(t, GatewayStats{Charges: 1, AmountCents: 3000}, gw.Stats(), "charged once")
	assert.Equal(t, int64(4000), getAccount(t, h, "acc-1").BalanceCents, "credited once")
}
