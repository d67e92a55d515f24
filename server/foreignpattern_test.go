package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// TestForeignPatternKeepsThePath: behind a router that sets r.Pattern in
// its own syntax (echo v5 sets "/v1/accounts/:id/payments" and wraps the
// middleware with echo.WrapMiddleware), the same key on another account
// is refused with 422, never answered with the first account's payment.
func TestForeignPatternKeepsThePath(t *testing.T) {
	runs := 0
	mw := server.Middleware(nil, server.Config{})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(r.URL.Path))
	}))
	send := func(path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}"))
		r.Pattern = "/v1/accounts/:id/payments" // as echo v5's router sets it
		r.Header.Set("Idempotency-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	require.Equal(t, http.StatusCreated, send("/v1/accounts/1/payments").Code)
	assert.Equal(t, "true", send("/v1/accounts/1/payments").Header().Get("Idempotent-Replayed"), "the retry")
	other := send("/v1/accounts/2/payments")
	assert.Equal(t, http.StatusUnprocessableEntity, other.Code, "the key on another account: %s", other.Body)
	assert.Equal(t, 1, runs)
}
