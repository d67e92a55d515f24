package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

const pay2500 = `{"account_id":"acc-1","amount_cents":2500,"currency":"EUR","reference":"order-17"}`

func TestPaymentIsMadeOnceAndReplayed(t *testing.T) {
	for _, backend := range apiBackends {
		t.Run(backend, func(t *testing.T) {
			cfg := newConfig(t, backend)
			h := New(cfg)
			putAccount(t, h, "acc-1", 10000)

			first := do(t, h, call{method: "POST", path: "/v1/payments", key: "k-1", body: pay2500})
			require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
			var p Payment
			require.NoError(t, json.Unmarshal(first.Body.Bytes(), &p))
			assert.Equal(t, Payment{ID: p.ID, AccountID: "acc-1", AmountCents: 2500, Currency: "EUR",
				BalanceCents: 7500, Reference: "order-17"}, p)

			retry := do(t, h, call{method: "POST", path: "/v1/payments", key: "k-1", body: pay2500})
			assert.Equal(t, http.StatusCreated, retry.Code)
			assert.Equal(t, "true", retry.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, first.Body.String(), retry.Body.String(), "the replay is byte for byte")

			assert.Equal(t, Account{ID: "acc-1", Currency: "EUR", BalanceCents: 7500, PaymentCount: 1}, getAccount(t, h, "acc-1"))
			stored, err := cfg.Backend.Payments(context.Background(), "acme")
			require.NoError(t, err)
			require.Len(t, stored, 1)
			assert.Equal(t, Payment{ID: p.ID, AccountID: "acc-1", AmountCents: 2500, Currency: "EUR",
				BalanceCents: 7500, Reference: "order-17", Tenant: "acme", Key: "k-1"}, stored[0])
		})
	}
}

func TestRefusedPaymentStoresNothing(t *testing.T) {
	cases := []struct{ name, body string }{
		{"malformed JSON", `{"account_id":`},
		{"unknown field", `{"account_id":"acc-1","amount_cents":100,"currency":"EUR","tip":5}`},
		{"trailing data", `{"account_id":"acc-1","amount_cents":100,"currency":"EUR"} {}`},
		{"unknown account", `{"account_id":"acc-404","amount_cents":100,"currency":"EUR"}`},
		{"zero amount", `{"account_id":"acc-1","amount_cents":0,"currency":"EUR"}`},
		{"negative amount", `{"account_id":"acc-1","amount_cents":-5,"currency":"EUR"}`},
		{"unknown currency", `{"account_id":"acc-1","amount_cents":100,"currency":"XXX"}`},
		{"other currency than the account's", `{"account_id":"acc-1","amount_cents":100,"currency":"USD"}`},
		{"bad account id", `{"account_id":"a b","amount_cents":100,"currency":"EUR"}`},
	}
	for _, backend := range apiBackends {
		t.Run(backend, func(t *testing.T) {
			h := New(newConfig(t, backend))
			putAccount(t, h, "acc-1", 100000)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					key := "refused-" + strings.ReplaceAll(c.name, " ", "-")
					rec := do(t, h, call{method: "POST", path: "/v1/payments", key: key, body: c.body})
					require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
					assert.Equal(t, "invalid-request", problemName(rec))
					// Nothing was stored under the key: the corrected
					// request is processed, not refused as a reused key.
					fixed := do(t, h, call{method: "POST", path: "/v1/payments", key: key, body: pay2500})
					assert.Equal(t, http.StatusCreated, fixed.Code, fixed.Body.String())
				})
			}
			assert.Equal(t, int64(len(cases)), getAccount(t, h, "acc-1").PaymentCount)
		})
	}
}

func TestInsufficientFundsIsAStoredOutcome(t *testing.T) {
	for _, backend := range apiBackends {
		t.Run(backend, func(t *testing.T) {
			h := New(newConfig(t, backend))
			putAccount(t, h, "acc-1", 1000)
			first := do(t, h, call{method: "POST", path: "/v1/payments", key: "k-402", body: pay2500})
			require.Equal(t, http.StatusPaymentRequired, first.Code, first.Body.String())
			assert.Equal(t, "insufficient-funds", problemName(first))

			// The 402 committed: after a top-up the same key still answers
			// with it, and the payment is not made.
			putAccount(t, h, "acc-1", 5000)
			retry := do(t, h, call{method: "POST", path: "/v1/payments", key: "k-402", body: pay2500})
			assert.Equal(t, http.StatusPaymentRequired, retry.Code)
			assert.Equal(t, "true", retry.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, first.Body.String(), retry.Body.String())
			assert.Equal(t, Account{ID: "acc-1", Currency: "EUR", BalanceCents: 5000}, getAccount(t, h, "acc-1"))
		})
	}
}

func TestKeyPolicy(t *testing.T) {
	for _, backend := range apiBackends {
		t.Run(backend, func(t *testing.T) {
			required := New(newConfig(t, backend))
			putAccount(t, required, "acc-1", 10000)
			rec := do(t, required, call{method: "POST", path: "/v1/payments", body: pay2500})
			assert.Equal(t, http.StatusBadRequest, rec.Code)
			assert.Equal(t, "key-missing", problemName(rec))

			cfg := newConfig(t, backend)
			cfg.Keys = server.KeyOptional
			optional := New(cfg)
			putAccount(t, optional, "acc-1", 10000)
			for range 2 { // without a key, each request is a payment of its own
				rec := do(t, optional, call{method: "POST", path: "/v1/payments", body: pay2500})
				assert.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
			}
			for range 2 { // with one, it is still protected
				rec := do(t, optional, call{method: "POST", path: "/v1/payments", key: "k-opt", body: pay2500})
				assert.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
			}
			assert.Equal(t, Account{ID: "acc-1", Currency: "EUR", BalanceCents: 2500, PaymentCount: 3}, getAccount(t, optional, "acc-1"))
		})
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	for _, backend := range apiBackends {
		t.Run(backend, func(t *testing.T) {
			h := New(newConfig(t, backend))
			putAccount(t, h, "acc-1", 10000)
			other := "Bearer globex:bob"

			rec := do(t, h, call{method: "GET", path: "/v1/accounts/acc-1", token: other})
			assert.Equal(t, http.StatusNotFound, rec.Code, "another tenant's account is invisible")
			rec = do(t, h, call{method: "POST", path: "/v1/payments", token: other, key: "k-1", body: pay2500})
			assert.Equal(t, http.StatusBadRequest, rec.Code, "and cannot be debited")

			// One key, two tenants: two records, two payments.
			rec = do(t, h, call{method: "PUT", path: "/v1/accounts/acc-1", token: other, body: `{"balance_cents":10000}`})
			require.Equal(t, http.StatusOK, rec.Code)
			a := do(t, h, call{method: "POST", path: "/v1/payments", key: "shared", body: pay2500})
			b := do(t, h, call{method: "POST", path: "/v1/payments", token: other, key: "shared", body: pay2500})
			require.Equal(t, http.StatusCreated, a.Code)
			require.Equal(t, http.StatusCreated, b.Code)
			assert.Empty(t, b.Header().Get("Idempotent-Replayed"), "a key never replays across tenants")
			assert.NotEqual(t, a.Body.String(), b.Body.String())
		})
	}
}

func TestAuthentication(t *testing.T) {
	h := New(Config{Logger: quietLogger()})
	for _, token := range []string{"-", "Bearer", "Bearer acme", "Basic acme:alice", "Bearer acme:", "Bearer :alice", "Bearer a b:c"} {
		t.Run(token, func(t *testing.T) {
			rec := do(t, h, call{method: "POST", path: "/v1/payments", token: token, key: "k", body: pay2500})
			assert.Equal(t, http.StatusUnauthorized, rec.Code)
			assert.Equal(t, "unauthenticated", problemName(rec))
			assert.Equal(t, `Bearer realm="payments"`, rec.Header().Get("WWW-Authenticate"))
		})
	}
}

func TestAccounts(t *testing.T) {
	for _, backend := range apiBackends {
		t.Run(backend, func(t *testing.T) {
			h := New(newConfig(t, backend))
			rec := do(t, h, call{method: "PUT", path: "/v1/accounts/acc-9", body: `{"balance_cents":700,"currency":"CHF"}`})
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.JSONEq(t, `{"id":"acc-9","currency":"CHF","balance_cents":700,"payment_count":0}`, rec.Body.String())
			assert.Equal(t, Account{ID: "acc-9", Currency: "CHF", BalanceCents: 700}, getAccount(t, h, "acc-9"))

			for _, body := range []string{`{}`, `{"balance_cents":-1}`, `{"balance_cents":1,"currency":"ABC"}`} {
				rec := do(t, h, call{method: "PUT", path: "/v1/accounts/acc-9", body: body})
				assert.Equal(t, http.StatusBadRequest, rec.Code, body)
			}
			rec = do(t, h, call{method: "GET", path: "/v1/accounts/nope"})
			assert.Equal(t, http.StatusNotFound, rec.Code)
			assert.Equal(t, "not-found", problemName(rec))
		})
	}
}

// A keyed body over the handlers' cap gets the middleware's 413, whatever
// its size past the cap, and nothing is stored: the same key with a
// corrected body is then processed.
func TestOversizedPaymentBody(t *testing.T) {
	h := New(newConfig(t, "memory"))
	putAccount(t, h, "acc-1", 10000)
	big := `{"account_id":"acc-1","amount_cents":2500,"currency":"EUR","reference":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	r := do(t, h, call{method: "POST", path: "/v1/payments", key: "k-big", body: big})
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.Code, r.Body.String())
	ok := do(t, h, call{method: "POST", path: "/v1/payments", key: "k-big", body: pay2500})
	assert.Equal(t, http.StatusCreated, ok.Code, ok.Body.String())
}
