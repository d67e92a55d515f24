package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// fakeExchange is a framework's request as a test gives it: a fixed route
// and scope, and a handler that records its calls.
type fakeExchange struct {
	route, tenant string
	routes        int // calls of Route
	scopes        int // calls of Scope
	ran           int // calls of Next
	leased        bool
	status        int
}

func (e *fakeExchange) Route() string { e.routes++; return e.route }

func (e *fakeExchange) Scope() (string, string) { e.scopes++; return e.tenant, "alice" }

func (e *fakeExchange) Next(w http.ResponseWriter, r *http.Request) {
	e.ran++
	_, e.leased = server.LeaseFrom(r.Context())
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte("made"))
}

func serveAdapter(a *server.Adapter, ex *fakeExchange, method, key string) (*httptest.ResponseRecorder, bool) {
	r := httptest.NewRequest(method, "/v1/accounts/1/payments", strings.NewReader("{}"))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	return w, a.Serve(w, r, ex)
}

// TestAdapterServe: the route and the scope come from the Exchange, the
// handler runs once with its lease in the request's context, and a replay
// or a refusal is reported as answered, so that the framework aborts the
// rest of its chain.
func TestAdapterServe(t *testing.T) {
	var committed []server.Event
	a := server.NewAdapter(nil, server.Config{Mode: server.Leased, Hooks: server.Hooks{
		Committed: func(_ context.Context, ev server.Event) { committed = append(committed, ev) },
	}})
	ex := &fakeExchange{route: "POST /v1/accounts/:id/payments", tenant: "acme", status: http.StatusCreated}

	w, answered := serveAdapter(a, ex, http.MethodPost, "k1")
	require.False(t, answered, "a first request runs the chain")
	assert.Equal(t, http.StatusCreated, w.Code)
	assert.True(t, ex.leased, "LeaseFrom(r.Context()) in Next")
	require.Len(t, committed, 1)
	assert.Equal(t, "POST /v1/accounts/:id/payments", committed[0].Route)
	assert.Equal(t, "acme", committed[0].Tenant)
	assert.False(t, committed[0].RouteIsPath, "an Exchange's route is a pattern")

	w, answered = serveAdapter(a, ex, http.MethodPost, "k1")
	assert.True(t, answered, "a replay is answered by the adapter")
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, "made", w.Body.String())

	_, answered = serveAdapter(a, ex, http.MethodPost, "")
	assert.True(t, answered, "a refusal (key missing) is answered by the adapter")
	assert.Equal(t, 1, ex.ran, "the handler ran once")
	assert.Equal(t, 3, ex.routes)
	assert.Equal(t, 3, ex.scopes)

	_, answered = serveAdapter(a, ex, http.MethodGet, "")
	assert.False(t, answered, "a GET passes through")
	assert.Equal(t, 2, ex.ran)
	assert.Equal(t, 3, ex.routes, "no route asked for a safe method")
	assert.Equal(t, 3, ex.scopes, "no scope asked for a request that passes through")

	bypass := &fakeExchange{status: http.StatusCreated}
	for range 2 {
		_, answered = serveAdapter(a, bypass, http.MethodPost, "k2")
		assert.False(t, answered, "an empty route bypasses idem")
	}
	assert.Equal(t, 2, bypass.ran)
	assert.Zero(t, bypass.scopes)
}

// TestNewAdapterRefusesRouteAndScope: the Exchange gives them.
func TestNewAdapterRefusesRouteAndScope(t *testing.T) {
	assert.Panics(t, func() {
		server.NewAdapter(nil, server.Config{Route: func(*http.Request) string { return "x" }})
	})
	assert.Panics(t, func() {
		server.NewAdapter(nil, server.Config{Scope: func(*http.Request) (string, string) { return "", "" }})
	})
}

// TestAdapterFingerprintsThePath: a framework may set r.Pattern in its own
// syntax (echo v5 sets "/v1/accounts/:id/payments"), whose parameters are
// no ServeMux wildcards: the fingerprint of a request an Exchange routes
// holds its path, so the same key on another account is refused, never
// answered with the first account's payment.
func TestAdapterFingerprintsThePath(t *testing.T) {
	a := server.NewAdapter(nil, server.Config{})
	ex := &fakeExchange{route: "POST /v1/accounts/:id/payments", status: http.StatusCreated}
	send := func(path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}"))
		r.Pattern = "/v1/accounts/:id/payments" // as echo v5 sets it
		r.Header.Set("Idempotency-Key", "k")
		w := httptest.NewRecorder()
		a.Serve(w, r, ex)
		return w
	}
	require.Equal(t, http.StatusCreated, send("/v1/accounts/1/payments").Code)
	other := send("/v1/accounts/2/payments")
	assert.Equal(t, http.StatusUnprocessableEntity, other.Code, "the key on another account: %s", other.Body)
	assert.Equal(t, 1, ex.ran)
}
