package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An account's currency never changes: a PUT without one keeps it, a PUT
// with another one is a 409 that changes nothing.
func TestPutAccountKeepsTheCurrency(t *testing.T) {
	for _, backend := range apiBackends {
		t.Run(backend, func(t *testing.T) {
			h := New(newConfig(t, backend))
			put := func(body string) int {
				return do(t, h, call{method: "PUT", path: "/v1/accounts/acc-1", body: body}).Code
			}
			require.Equal(t, http.StatusOK, put(`{"balance_cents":700,"currency":"CHF"}`))

			assert.Equal(t, http.StatusOK, put(`{"balance_cents":900}`), "a PUT without currency")
			assert.Equal(t, Account{ID: "acc-1", Currency: "CHF", BalanceCents: 900}, getAccount(t, h, "acc-1"))

			rec := do(t, h, call{method: "PUT", path: "/v1/accounts/acc-1", body: `{"balance_cents":5,"currency":"USD"}`})
			assert.Equal(t, http.StatusConflict, rec.Code, rec.Body.String())
			assert.Equal(t, "currency-conflict", problemName(rec))
			assert.Equal(t, Account{ID: "acc-1", Currency: "CHF", BalanceCents: 900}, getAccount(t, h, "acc-1"), "nothing changed")

			assert.Equal(t, http.StatusOK, put(`{"balance_cents":800,"currency":"CHF"}`), "a PUT with the account's currency")
			assert.Equal(t, Account{ID: "acc-1", Currency: "CHF", BalanceCents: 800}, getAccount(t, h, "acc-1"))

			require.Equal(t, http.StatusOK, do(t, h, call{method: "PUT", path: "/v1/accounts/acc-2", body: `{"balance_cents":1}`}).Code)
			assert.Equal(t, Account{ID: "acc-2", Currency: "EUR", BalanceCents: 1}, getAccount(t, h, "acc-2"), "a new account without currency")
		})
	}
}
