package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Config.DeadlineHeader: a keyed request whose client has no time left is
// answered 504 deadline-expired before its key is claimed, so that the
// handler does not run and a retry with time left is processed; time
// left, a value that is not a number, or no header pass.
func TestConfigDeadlineHeader(t *testing.T) {
	runs := 0
	h := Middleware(NewMemoryStore(), Config{DeadlineHeader: "x-request-deadline-ms"})(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			runs++
			w.WriteHeader(http.StatusCreated)
		}))
	send := func(key, left string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		if left != "" {
			req.Header.Set("X-Request-Deadline-Ms", left)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, left := range []string{"0", "-5"} {
		rec := send("k1", left)
		require.Equal(t, http.StatusGatewayTimeout, rec.Code, "left %s", left)
		assert.Contains(t, rec.Body.String(), "deadline-expired")
		assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	}
	assert.Equal(t, 0, runs, "a request whose deadline passed must not run")
	assert.Equal(t, http.StatusCreated, send("k1", "250").Code, "the key was not claimed: a retry with time left runs")
	assert.Equal(t, http.StatusCreated, send("k2", "soon").Code)
	assert.Equal(t, http.StatusCreated, send("k3", "").Code)
	assert.Equal(t, 3, runs)

	plain := Middleware(NewMemoryStore(), Config{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set("X-Request-Deadline-Ms", "0")
	rec := httptest.NewRecorder()
	plain.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusCreated, rec.Code, "no DeadlineHeader configured: the header is not read")

	assert.Panics(t, func() { Middleware(nil, Config{DeadlineHeader: "bad header"}) })
}
