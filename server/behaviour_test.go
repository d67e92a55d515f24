package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/replaytest"
	"github.com/idemkit/idem/internal/wire"
)

// payments is the test handler, [replaytest.ServePayment], counting its
// runs.
type payments struct {
	k    *kit
	runs atomic.Int64
}

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	replaytest.ServePayment(w, r, p.runs.Add(1), p.k.effect)
}

// payServer serves payments at POST /v1/payments behind the middleware.
func payServer(t *testing.T, k *kit, cfg Config) (*http.ServeMux, *payments) {
	t.Helper()
	p := &payments{k: k}
	mux := http.NewServeMux()
	cfg.ReplayHeaders = append(cfg.ReplayHeaders, "X-Trace")
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(cfg))(p))
	return mux, p
}

func problemName(t *testing.T, r reply) string {
	t.Helper()
	p, ok := wire.ReadProblem(r.header.Get("Content-Type"), strings.NewReader(r.body), 1<<16)
	require.True(t, ok, "response %d %q is not a problem document", r.status, r.body)
	assert.Equal(t, r.status, p.Status, "problem status")
	assert.True(t, strings.HasPrefix(p.Type, wire.DefaultProblemPrefix), "problem type %q", p.Type)
	return p.Name()
}

// scribbler is an outer middleware's ResponseWriter that rewrites header
// values in place as the response starts.
type scribbler struct{ http.ResponseWriter }

func (s scribbler) WriteHeader(code int) {
	for _, values := range s.Header() {
		for i := range values {
			values[i] = "scribbled"
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func TestReplayedHeadersAreTheResponses(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		mux, _ := payServer(t, k, Config{})
		outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mux.ServeHTTP(scribbler{w}, r) })
		srv := httptest.NewServer(outer)
		t.Cleanup(srv.Close)
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-hdr", `{"amount": 1}`).status)
		post(t, srv, "/v1/payments", "k-hdr", `{"amount": 1}`) // a replay the outer middleware scribbles on
		direct := serve(t, mux)
		again := post(t, direct, "/v1/payments", "k-hdr", `{"amount": 1}`)
		require.True(t, again.replayed())
		assert.Equal(t, []string{"first", "second"}, again.header.Values("X-Trace"), "the stored record changed")
		assert.Equal(t, "application/json", again.header.Get("Content-Type"))
	})
}

func TestKeyPolicy(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		mux, p := payServer(t, k, Config{})
		optional := &payments{k: k}
		mux.Handle("POST /v1/optional", Middleware(k.store, quiet(Config{Keys: KeyOptional}))(optional))
		mux.Handle("/v1/any", Middleware(k.store, quiet(Config{}))(optional))
		srv := serve(t, mux)
		body := `{"amount": 3}`

		missing := post(t, srv, "/v1/payments", "", body)
		assert.Equal(t, http.StatusBadRequest, missing.status)
		assert.Equal(t, wire.ProblemKeyMissing, problemName(t, missing))
		for _, key := range []string{"has space", "clé", strings.Repeat("k", 256), `"unterminated`} {
			r := post(t, srv, "/v1/payments", key, body)
			assert.Equal(t, http.StatusBadRequest, r.status, "key %q", key)
			assert.Equal(t, wire.ProblemKeyInvalid, problemName(t, r), "key %q", key)
		}
		two := post(t, srv, "/v1/payments", "one", body, "Idempotency-Key", "two")
		assert.Equal(t, wire.ProblemKeyInvalid, problemName(t, two), "two key fields")
		assert.EqualValues(t, 0, p.runs.Load(), "no refused request runs")

		bare := post(t, srv, "/v1/payments", "8e03978e-40d5-43e8-bc93-6894a57f9324", body)
		quoted := post(t, srv, "/v1/payments", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, body)
		assert.Equal(t, http.StatusCreated, bare.status)
		assert.True(t, quoted.replayed(), "the sf-string form is the same key")

		assert.Equal(t, http.StatusCreated, post(t, srv, "/v1/optional", "", body).status)
		assert.Equal(t, http.StatusCreated, post(t, srv, "/v1/optional", "", body).status)
		assert.Equal(t, http.StatusCreated, send(t, srv, http.MethodPut, "/v1/any", "", body).status, "PUT needs no key")
		assert.Equal(t, http.StatusCreated, send(t, srv, http.MethodGet, "/v1/any", "", body).status, "GET passes")
		assert.EqualValues(t, 4, optional.runs.Load(), "unkeyed requests run every time")
	})
}

// The Scope func (often an auth lookup) runs only for requests the
// middleware handles, not for those that pass straight through.
func TestScopeOnlyForHandledRequests(t *testing.T) {
	k := memoryKit(t)
	var calls atomic.Int32
	scope := func(*http.Request) (string, string) { calls.Add(1); return "t", "p" }
	mux, _ := payServer(t, k, Config{Scope: scope, Keys: KeyOptional})
	srv := serve(t, mux)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "", `{"amount": 1}`).status)
	assert.Zero(t, calls.Load(), "a request without a key on an optional route passes through")
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-scope", `{"amount": 1}`).status)
	assert.EqualValues(t, 1, calls.Load())
}
