package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// problemDetail returns the detail of a problem+json response.
func problemDetail(t *testing.T, body []byte) string {
	t.Helper()
	var p wire.Problem
	require.NoError(t, json.Unmarshal(body, &p), "%s", body)
	return p.Detail
}

// A body the API cannot take is refused in the API's terms: what is wrong,
// named by the field, never a Go type or decoder message, and not
// HTML-escaped.
func TestBadBodiesAreRefusedInTheAPIsTerms(t *testing.T) {
	h := New(Config{Logger: quietLogger()})
	putAccount(t, h, "acc-1", 10000)
	tests := []struct {
		name, body, want string
	}{
		{"a string amount", `{"account_id":"acc-1","amount_cents":"12","currency":"EUR"}`, "amount_cents must be an integer"},
		{"a fraction", `{"account_id":"acc-1","amount_cents":1.5,"currency":"EUR"}`, "amount_cents must be an integer"},
		{"a number id", `{"account_id":7,"amount_cents":1,"currency":"EUR"}`, "account_id must be a string"},
		{"an unknown field", `{"account_id":"acc-1","amount_cents":1,"currency":"EUR","memo":"<x>"}`,
			`"memo" is not a field of this request (fields: account_id, amount_cents, currency, reference)`},
		{"a field in another case", `{"account_id":"acc-1","AMOUNT_CENTS":1,"currency":"EUR"}`, `"AMOUNT_CENTS" is not a field of this request`},
		{"a field twice", `{"account_id":"acc-1","amount_cents":1,"amount_cents":5000,"currency":"EUR"}`, "amount_cents is given more than once"},
		{"an array", `[1,2]`, "the body must be a JSON object"},
		{"broken JSON", `{"account_id":`, "the body is not valid JSON"},
		{"no body", ``, "the body is empty: send a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(t, h, call{method: "POST", path: "/v1/payments", key: "k-" + strings.ReplaceAll(tt.name, " ", "-"), body: tt.body})
			require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
			assert.Equal(t, "invalid-request", problemName(rec))
			detail := problemDetail(t, rec.Body.Bytes())
			assert.True(t, strings.HasPrefix(detail, tt.want), "detail %q, want it to start with %q", detail, tt.want)
			assert.NotContains(t, rec.Body.String(), "Go struct")
			assert.NotContains(t, rec.Body.String(), `\u003c`)
		})
	}
	assert.Zero(t, getAccount(t, h, "acc-1").PaymentCount, "nothing was paid")
}

// One body limit for every route, with or without a key: 413
// request-too-large as a problem document.
func TestOversizedBodyIs413WithOrWithoutAKey(t *testing.T) {
	h := New(Config{Logger: quietLogger()})
	big := `{"balance_cents":1,"currency":"EUR","x":"` + strings.Repeat("a", maxBodyBytes) + `"}`
	for _, c := range []call{
		{method: "PUT", path: "/v1/accounts/acc-1", body: big},
		{method: "PUT", path: "/v1/accounts/acc-1", key: "k-put", body: big},
		{method: "POST", path: "/v1/payments", key: "k-pay", body: big},
	} {
		rec := do(t, h, c)
		assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "%s %s key %q: %s", c.method, c.path, c.key, rec.Body)
		assert.Equal(t, "request-too-large", problemName(rec), "%s key %q", c.method, c.key)
	}
}

// 404 and 405 are problem documents too, the 405 with its Allow header.
func TestUnroutedRequestsGetProblems(t *testing.T) {
	for name, h := range map[string]http.Handler{
		"api":      New(Config{Logger: quietLogger()}),
		"gateway":  NewGateway(GatewayConfig{Logger: quietLogger()}),
		"receiver": NewReceiver(ReceiverConfig{Logger: quietLogger()}),
	} {
		t.Run(name, func(t *testing.T) {
			rec := do(t, h, call{method: "GET", path: "/v2/nothing"})
			assert.Equal(t, http.StatusNotFound, rec.Code)
			assert.Equal(t, "not-found", problemName(rec), rec.Body.String())
		})
	}
	rec := do(t, New(Config{Logger: quietLogger()}), call{method: "DELETE", path: "/v1/payments"})
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Equal(t, "method-not-allowed", problemName(rec), rec.Body.String())
	assert.Equal(t, "POST", rec.Header().Get("Allow"))
	assert.Contains(t, problemDetail(t, rec.Body.Bytes()), "DELETE is not allowed on /v1/payments; allowed: POST")
}

// A payment in another currency than the account's names both.
func TestCurrencyMismatchNamesBothCurrencies(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			h := New(newConfig(t, backend))
			rec := do(t, h, call{method: "PUT", path: "/v1/accounts/acc-1", body: `{"balance_cents":10000}`})
			require.Equal(t, http.StatusOK, rec.Code)
			assert.Contains(t, rec.Body.String(), `"currency":"EUR"`, "the PUT response shows the currency an account got")

			pay := do(t, h, call{method: "POST", path: "/v1/payments", key: "k-usd",
				body: `{"account_id":"acc-1","amount_cents":100,"currency":"USD"}`})
			require.Equal(t, http.StatusBadRequest, pay.Code)
			assert.Equal(t, "the request's currency, USD, differs from the account's currency, EUR", problemDetail(t, pay.Body.Bytes()))

			put := do(t, h, call{method: "PUT", path: "/v1/accounts/acc-1", body: `{"balance_cents":1,"currency":"GBP"}`})
			require.Equal(t, http.StatusConflict, put.Code)
			assert.True(t, strings.HasPrefix(problemDetail(t, put.Body.Bytes()),
				"the request's currency, GBP, differs from the account's currency, EUR"), put.Body.String())
		})
	}
}
