package idemredis

import (
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemredis/internal/redistest"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// The admin page shows a Redis store's records: the overview's exact
// count, a key looked up alone and in its scope, the stuck operations.
func TestAdminPageOnRedis(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{}, &storetest.Clock{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls, _ := server.LeaseFrom(r.Context())
		_ = ls.Checkpoint(r.Context(), "gateway-called", nil)
		if op, _ := server.OperationFrom(r.Context()); op.Key == "stuck-1" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	quiet := slog.New(slog.DiscardHandler)
	mux.Handle("POST /v1/charges", server.Middleware(s, server.Config{Mode: server.Leased, Logger: quiet})(h))
	mux.Handle("/admin/", admin.Handler(admin.Config{Records: server.NewOperator(s, server.OperatorConfig{Logger: quiet}),
		Prefix: "/admin", Logger: quiet}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, key := range []string{"done-1", "done-2", "stuck-1"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/charges", nil)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, html.UnescapeString(string(b))
	}
	status, body := get("/admin/")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "<th>Records</th><td>3</td>")
	status, body = get("/admin/key?key=done-1")
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "POST /v1/charges")
	status, body = get("/admin/key?route=POST+%2Fv1%2Fcharges&key=done-2")
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "the stored 201, replayed")
	status, body = get("/admin/inflight?stuck=1")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "stuck-1")
}
