package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// Config.KeyHeader names the header the middleware reads the key from
// (issue 18): a retry with the key in that header replays, and the
// default header then names nothing.
func TestConfigKeyHeader(t *testing.T) {
	runs := 0
	h := Middleware(NewMemoryStore(), Config{KeyHeader: "paypal-request-id"})(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			runs++
			w.WriteHeader(http.StatusCreated)
		}))
	send := func(header, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{}`))
		req.Header.Set(header, key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	require.Equal(t, http.StatusCreated, send("PayPal-Request-Id", "k1").Code)
	replay := send("Paypal-Request-Id", "k1")
	assert.Equal(t, http.StatusCreated, replay.Code)
	assert.Equal(t, "true", replay.Header().Get(wire.HeaderReplayed))
	assert.Equal(t, 1, runs)

	missing := send(wire.HeaderKey, "k2")
	assert.Equal(t, http.StatusBadRequest, missing.Code, "Idempotency-Key names no key under another KeyHeader")
	assert.Contains(t, missing.Body.String(), wire.ProblemKeyMissing)

	req := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	req.Header.Add("PayPal-Request-Id", "a")
	req.Header.Add("PayPal-Request-Id", "b")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "more than one Paypal-Request-Id field")

	assert.Panics(t, func() { Middleware(nil, Config{KeyHeader: "bad header"}) })
}
