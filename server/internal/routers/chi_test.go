package routers

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// chi (v5.2 and later) sets r.Pattern and the path values itself, so the
// default Route works behind it; the one line of Config.Route's doc gives
// the same routes on older chi.
func TestBehindChi(t *testing.T) {
	for name, route := range map[string]func(*http.Request) string{"default": nil, "chi's RoutePattern": chiRoute} {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store server.Store) {
				logs := &syncBuffer{}
				cfg := server.Config{Route: route, Logger: slog.New(slog.NewTextHandler(logs, nil))}
				p := &payments{}
				r := chi.NewRouter()
				r.With(server.Middleware(store, cfg)).Post("/v1/accounts/{id}/payments", p.ServeHTTP)
				srv := httptest.NewServer(r)
				t.Cleanup(srv.Close)

				first := post(t, srv, "/v1/accounts/1/payments", "k-chi")
				require.Equal(t, http.StatusCreated, first.StatusCode)
				again := post(t, srv, "/v1/accounts/1/payments", "k-chi")
				assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
				other := post(t, srv, "/v1/accounts/2/payments", "k-chi")
				assert.Equal(t, http.StatusUnprocessableEntity, other.StatusCode,
					"one route, so the same key on another account is another request")
				assert.EqualValues(t, 1, p.runs.Load())
				assert.Contains(t, logs.String(), `route="POST /v1/accounts/{id}/payments"`)
				assert.NotContains(t, logs.String(), "no route pattern")
			})
		})
	}
}

// chiRoute is the one line chi needs (Config.Route's doc).
func chiRoute(r *http.Request) string {
	return r.Method + " " + chi.RouteContext(r.Context()).RoutePattern()
}

// eachStore runs f as a parallel subtest on the memory store and on the
// Postgres store (a schema of its own).
func eachStore(t *testing.T, f func(t *testing.T, store server.Store)) {
	t.Helper()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		f(t, server.NewMemoryStore())
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.NewPool(t, pgtest.SchemaURL(t))
		require.NoError(t, server.Migrate(context.Background(), pool))
		f(t, server.NewPostgresStore(pool))
	})
}

// payments is the handler under test: it counts its runs and answers 201.
type payments struct{ runs atomic.Int64 }

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.runs.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"paid":true}`)
}

// post sends one payment with key to path and returns the response, its
// body read and closed.
func post(t *testing.T, srv *httptest.Server, path, key string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(`{"amount": 5}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp
}

// syncBuffer is a log sink that tests read while handlers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
