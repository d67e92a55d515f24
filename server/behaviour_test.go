package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// payments is the test handler: {"amount": n} with n > 0 gets 201 and one
// "pay" effect, 402 gets a stored decline, anything else 400.
type payments struct {
	k    *kit
	runs atomic.Int64
}

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := p.runs.Add(1)
	var req struct{ Amount json.Number }
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	amount, err := 0.0, dec.Decode(&req)
	if err == nil {
		amount, err = strconv.ParseFloat(string(req.Amount), 64)
	}
	switch {
	case err != nil || amount <= 0:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"title":"amount must be positive"}`)
		return
	case amount == 402:
		_ = p.k.effect(r.Context(), "declined")
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = io.WriteString(w, `{"declined":true}`)
		return
	}
	if err := p.k.effect(r.Context(), "pay"); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", fmt.Sprintf("/v1/payments/%d", n))
	h.Add("X-Trace", "first")
	h.Add("X-Trace", "second")
	h.Set("Set-Cookie", "session=secret")
	h.Set("X-Not-Allowlisted", "x")
	w.WriteHeader(http.StatusCreated)
	// Odd whitespace and key order that JSONB would normalise.
	_, _ = fmt.Fprintf(w, `{"id":%d,  "status":"paid" ,"amount":%s,"z":{"b":1,"a":[3, 2,1]}}`, n, req.Amount)
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

func TestReplayIsByteForByte(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		mux, p := payServer(t, k, Config{})
		srv := serve(t, mux)
		first := post(t, srv, "/v1/payments", "k-replay", `{"amount": 10}`)
		require.Equal(t, http.StatusCreated, first.status, first.body)
		assert.False(t, first.replayed())
		assert.Equal(t, "session=secret", first.header.Get("Set-Cookie"), "the first response is the handler's own")

		again := post(t, srv, "/v1/payments", "k-replay", `{"amount": 10}`)
		require.Equal(t, http.StatusCreated, again.status, again.body)
		assert.True(t, again.replayed(), "Idempotent-Replayed")
		assert.Equal(t, first.body, again.body, "replayed body")
		assert.Equal(t, `{"id":1,  "status":"paid" ,"amount":10,"z":{"b":1,"a":[3, 2,1]}}`, again.body)
		assert.Equal(t, "application/json", again.header.Get("Content-Type"))
		assert.Equal(t, "/v1/payments/1", again.header.Get("Location"))
		assert.Equal(t, []string{"first", "second"}, again.header.Values("X-Trace"), "multi-valued header")
		assert.Empty(t, again.header.Values("Set-Cookie"), "Set-Cookie is never replayed")
		assert.Empty(t, again.header.Get("X-Not-Allowlisted"))
		assert.Equal(t, strconv.Itoa(len(first.body)), again.header.Get("Content-Length"))
		assert.EqualValues(t, 1, p.runs.Load(), "handler runs")
		assert.Equal(t, 1, k.count(t, "pay"), "effects")
	})
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

func TestSameKeyDifferentRequestIsRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		mux, p := payServer(t, k, Config{})
		srv := serve(t, mux)
		first := post(t, srv, "/v1/payments", "k-fp", `{"amount": 10, "currency": "EUR"}`)
		require.Equal(t, http.StatusCreated, first.status)

		same := post(t, srv, "/v1/payments", "k-fp", "{\n  \"currency\" : \"EUR\",\n  \"amount\":10\n}")
		assert.Equal(t, http.StatusCreated, same.status, "equivalent JSON: %s", same.body)
		assert.True(t, same.replayed(), "equivalent JSON replays")

		for _, body := range []string{`{"amount": 11, "currency": "EUR"}`, `{"amount": 10.0, "currency": "EUR"}`, `{"amount": 10}`} {
			r := post(t, srv, "/v1/payments", "k-fp", body)
			assert.Equal(t, http.StatusUnprocessableEntity, r.status, "body %s", body)
			assert.Equal(t, wire.ProblemKeyReused, problemName(t, r))
		}
		assert.EqualValues(t, 1, p.runs.Load(), "handler runs")
	})
}

// A catch-all pattern routes many paths to one handler: the path under it
// is part of the request, so the key of one path is refused on another.
func TestCatchAllPatternFingerprintsThePath(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		p := &payments{k: k}
		mux := http.NewServeMux()
		mux.Handle("POST /v1/accounts/", Middleware(k.store, quiet(Config{}))(p))
		srv := serve(t, mux)
		body := `{"amount": 5}`
		first := post(t, srv, "/v1/accounts/1", "k-sub", body)
		require.Equal(t, http.StatusCreated, first.status, first.body)
		assert.True(t, post(t, srv, "/v1/accounts/1", "k-sub", body).replayed(), "the same path replays")
		other := post(t, srv, "/v1/accounts/2", "k-sub", body)
		assert.Equal(t, http.StatusUnprocessableEntity, other.status, "another path under the pattern: %s", other.body)
		assert.Equal(t, wire.ProblemKeyReused, problemName(t, other))
		assert.EqualValues(t, 1, p.runs.Load(), "handler runs")
	})
}

func TestScopeSeparatesRecords(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		scope := func(r *http.Request) (string, string) { return r.Header.Get("X-Tenant"), r.Header.Get("X-User") }
		mux, p := payServer(t, k, Config{Scope: scope})
		refunds := &payments{k: k}
		mux.Handle("POST /v1/refunds", Middleware(k.store, quiet(Config{Scope: scope}))(refunds))
		srv := serve(t, mux)
		body := `{"amount": 5}`
		a := post(t, srv, "/v1/payments", "shared", body, "X-Tenant", "acme", "X-User", "u1")
		b := post(t, srv, "/v1/payments", "shared", body, "X-Tenant", "globex", "X-User", "u1")
		c := post(t, srv, "/v1/payments", "shared", body, "X-Tenant", "acme", "X-User", "u2")
		d := post(t, srv, "/v1/refunds", "shared", body, "X-Tenant", "acme", "X-User", "u1")
		for _, r := range []reply{a, b, c, d} {
			assert.Equal(t, http.StatusCreated, r.status)
			assert.False(t, r.replayed(), "another scope must not see the record")
		}
		again := post(t, srv, "/v1/payments", "shared", body, "X-Tenant", "acme", "X-User", "u1")
		assert.True(t, again.replayed())
		assert.Equal(t, a.body, again.body)
		assert.EqualValues(t, 3, p.runs.Load(), "payments runs")
		assert.EqualValues(t, 1, refunds.runs.Load(), "refunds runs")
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

// flaky fails its first run after making its effect, then succeeds.
func flaky(k *kit, runs *atomic.Int64, fail func(w http.ResponseWriter)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if err := k.effect(r.Context(), "pay"); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if n == 1 {
			fail(w)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, "run %d", n)
	})
}

func TestFailureReleasesTheKey(t *testing.T) {
	failures := map[string]func(w http.ResponseWriter){
		"503":   func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) },
		"panic": func(http.ResponseWriter) { panic("handler bug") },
	}
	for name, fail := range failures {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, k *kit) {
				var runs atomic.Int64
				mux := http.NewServeMux()
				mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(flaky(k, &runs, fail)))
				srv := serve(t, mux)
				first := post(t, srv, "/v1/payments", "k-fail", `{}`)
				if name == "panic" {
					assert.Error(t, first.err, "a panic aborts the response")
				} else {
					assert.Equal(t, http.StatusServiceUnavailable, first.status)
				}
				if k.pool != nil {
					assert.Equal(t, 0, k.count(t, "pay"), "the failed run's effect rolled back")
				}
				retry := post(t, srv, "/v1/payments", "k-fail", `{}`)
				assert.Equal(t, http.StatusCreated, retry.status)
				assert.False(t, retry.replayed(), "the retry runs afresh")
				last := post(t, srv, "/v1/payments", "k-fail", `{}`)
				assert.True(t, last.replayed())
				assert.Equal(t, "run 2", last.body)
				assert.EqualValues(t, 2, runs.Load(), "handler runs")
				if k.pool != nil {
					assert.Equal(t, 1, k.count(t, "pay"), "effects")
				}
			})
		})
	}
}

func TestRejectionStoresNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		mux, p := payServer(t, k, Config{})
		srv := serve(t, mux)
		bad := post(t, srv, "/v1/payments", "k-400", `{"amount": -5}`)
		assert.Equal(t, http.StatusBadRequest, bad.status)
		fixed := post(t, srv, "/v1/payments", "k-400", `{"amount": 5}`)
		assert.Equal(t, http.StatusCreated, fixed.status, "a corrected retry is processed, not 422: %s", fixed.body)
		assert.False(t, fixed.replayed())
		assert.True(t, post(t, srv, "/v1/payments", "k-400", `{"amount": 5}`).replayed())

		declined := post(t, srv, "/v1/payments", "k-402", `{"amount": 402}`)
		assert.Equal(t, http.StatusPaymentRequired, declined.status)
		again := post(t, srv, "/v1/payments", "k-402", `{"amount": 402}`)
		assert.Equal(t, http.StatusPaymentRequired, again.status)
		assert.True(t, again.replayed(), "a 402 is the operation's outcome: stored")
		assert.EqualValues(t, 3, p.runs.Load(), "handler runs")
		assert.Equal(t, 1, k.count(t, "declined"))
	})
}

func TestRetentionExpiryRunsAgain(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		mux, p := payServer(t, k, Config{Retention: time.Hour})
		srv := serve(t, mux)
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-ret", `{"amount": 1}`).status)
		k.clock.Advance(59 * time.Minute)
		assert.True(t, post(t, srv, "/v1/payments", "k-ret", `{"amount": 1}`).replayed(), "within retention")
		k.clock.Advance(2 * time.Minute)
		after := post(t, srv, "/v1/payments", "k-ret", `{"amount": 1}`)
		assert.Equal(t, http.StatusCreated, after.status)
		assert.False(t, after.replayed(), "past retention the record counts as absent")
		assert.True(t, post(t, srv, "/v1/payments", "k-ret", `{"amount": 1}`).replayed(), "the new run is stored")
		assert.EqualValues(t, 2, p.runs.Load())
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

// A replay's header values are the replay's own: code after the middleware
// that changes them in place does not change the stored record.
func TestReplayedHeaderIsACopy(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		inner, _ := payServer(t, k, Config{})
		outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(w, r)
			if v := w.Header()["X-Trace"]; len(v) > 0 {
				v[0] = "changed after the replay"
			}
		})
		mux := http.NewServeMux()
		mux.Handle("/", outer)
		srv := serve(t, mux)
		first := post(t, srv, "/v1/payments", "k-copy", `{"amount": 1}`)
		require.Equal(t, http.StatusCreated, first.status)
		require.NotEmpty(t, first.header.Values("X-Trace"))
		for range 2 {
			r := post(t, srv, "/v1/payments", "k-copy", `{"amount": 1}`)
			require.True(t, r.replayed())
			assert.Equal(t, first.header.Values("X-Trace"), r.header.Values("X-Trace"))
		}
	})
}
