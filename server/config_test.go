package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

func TestConfigDefaults(t *testing.T) {
	s := newSettings(Config{})
	assert.Equal(t, defaultRetention, s.Retention)
	assert.Equal(t, defaultLease, s.Lease)
	assert.Equal(t, defaultWaitBound, s.waitBound())
	assert.EqualValues(t, defaultMaxRequestBytes, s.MaxRequestBytes)
	assert.Equal(t, defaultMaxResponseBytes, s.MaxResponseBytes)
	assert.Equal(t, "urn:idem:problem:", s.ProblemPrefix)
	assert.NotNil(t, s.Logger)
	assert.Equal(t, 0*time.Second, newSettings(Config{WaitBound: -1}).waitBound(), "negative: no wait")
	for _, code := range []int{400, 401, 403, 404, 405, 406, 413, 415, 422, 429} {
		assert.Equal(t, outcomeReject, s.outcome(code), "status %d", code)
	}
	for _, code := range []int{200, 201, 204, 302, 402, 409, 410} {
		assert.Equal(t, outcomeStore, s.outcome(code), "status %d", code)
	}
	for _, code := range []int{500, 502, 503} {
		assert.Equal(t, outcomeFail, s.outcome(code), "status %d", code)
	}
	none := newSettings(Config{RejectStatuses: []int{}})
	assert.Equal(t, outcomeStore, none.outcome(400), "an empty set rejects nothing")
	assert.True(t, s.allow("Location"))
	assert.False(t, newSettings(Config{ReplayHeaders: []string{"set-cookie"}}).allow("Set-Cookie"))
}

// A zero or negative size, duration or count means its default (a negative
// cap made every request 413, a negative Batch was a Postgres LIMIT error,
// a negative Interval panicked); only a negative WaitBound has a meaning
// of its own: no wait.
func TestNegativeConfigMeansTheDefault(t *testing.T) {
	tests := []struct {
		name      string
		got, want any
	}{
		{"Retention", newSettings(Config{Retention: -time.Hour}).Retention, defaultRetention},
		{"Lease", newSettings(Config{Lease: -time.Second}).Lease, defaultLease},
		{"MaxRequestBytes", newSettings(Config{MaxRequestBytes: -1}).MaxRequestBytes, int64(defaultMaxRequestBytes)},
		{"MaxResponseBytes", newSettings(Config{MaxResponseBytes: -1}).MaxResponseBytes, defaultMaxResponseBytes},
		{"WaitBound", newSettings(Config{WaitBound: -time.Second}).waitBound(), time.Duration(0)},
		{"Interval", SweepConfig{Interval: -time.Second}.withDefaults().Interval, time.Minute},
		{"Batch", SweepConfig{Batch: -1}.withDefaults().Batch, 100},
		{"MaxBatches", SweepConfig{MaxBatches: -1}.withDefaults().MaxBatches, 1000},
		{"zero Interval", SweepConfig{}.withDefaults().Interval, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestRoute(t *testing.T) {
	s := newSettings(Config{})
	tests := []struct{ pattern, method, target, want string }{
		{"POST /v1/payments", "POST", "/v1/payments", "POST /v1/payments"},
		{"/v1/things/{id}", "PATCH", "/v1/things/7", "PATCH /v1/things/{id}"},
		{"POST  example.com/v1/x", "POST", "http://example.com/v1/x", "POST example.com/v1/x"},
	}
	for _, tt := range tests {
		var got string
		mux := http.NewServeMux()
		mux.HandleFunc(tt.pattern, func(_ http.ResponseWriter, r *http.Request) { got = s.route(r) })
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tt.method, tt.target, nil))
		assert.Equal(t, tt.want, got, "pattern %q", tt.pattern)
	}
	bare := httptest.NewRequest("POST", "/no/pattern", nil)
	assert.Equal(t, "POST /no/pattern", s.route(bare), "without a pattern the path is the route")
	custom := newSettings(Config{Route: func(*http.Request) string { return "charge" }})
	assert.Equal(t, "charge", custom.route(bare))
}

// Event.RouteIsPath says whether the route is the request's raw path
// (no pattern, no Config.Route), in the events before a claim
// (key-missing) and after it (Claimed, Committed).
func TestEventSaysWhetherTheRouteIsAPath(t *testing.T) {
	tests := []struct {
		name  string
		route func(*http.Request) string
		mount func(mw func(http.Handler) http.Handler, h http.Handler) http.Handler
		want  bool
	}{
		{"middleware per pattern", nil, func(mw func(http.Handler) http.Handler, h http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("POST /v1/payments/{id}", mw(h))
			return mux
		}, false},
		{"middleware around the mux", nil, func(mw func(http.Handler) http.Handler, h http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("POST /v1/payments/{id}", h)
			return mw(mux)
		}, true},
		{"Config.Route", func(*http.Request) string { return "POST /v1/payments/:id" }, func(mw func(http.Handler) http.Handler, h http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("POST /v1/payments/{id}", h)
			return mw(mux)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events []Event
			record := func(_ context.Context, e Event) { events = append(events, e) }
			cfg := quiet(Config{Route: tt.route, Hooks: Hooks{Claimed: record, Committed: record, Refused: record}})
			h := tt.mount(Middleware(NewMemoryStore(), cfg), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusCreated)
			}))
			for _, key := range []string{"k1", ""} {
				req := httptest.NewRequest(http.MethodPost, "/v1/payments/p1", strings.NewReader(`{}`))
				if key != "" {
					req.Header.Set("Idempotency-Key", key)
				}
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
			require.Len(t, events, 3, "claimed, committed, refused (key-missing)")
			for _, e := range events {
				assert.Equal(t, tt.want, e.RouteIsPath, "route %q, problem %q", e.Route, e.Problem)
			}
		})
	}
}

func TestRouteFuncCanBypass(t *testing.T) {
	k := memoryKit(t)
	var runs int
	h := Middleware(k.store, quiet(Config{Route: func(*http.Request) string { return "" }}))(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { runs++; w.WriteHeader(http.StatusCreated) }))
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/x", nil)) // no key, yet no 400
		assert.Equal(t, http.StatusCreated, rec.Code)
	}
	assert.Equal(t, 2, runs)
}

func TestRequestBodyCap(t *testing.T) {
	k := memoryKit(t)
	var runs int
	h := Middleware(k.store, quiet(Config{MaxRequestBytes: 8}))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs++ }))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/x", strings.NewReader("0123456789"))
	req.Header.Set("Idempotency-Key", "k")
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	assert.Equal(t, 0, runs)
}

// A body that fails to read is refused with 400 request-unreadable, and
// nothing is claimed: a retry that can be read runs.
func TestUnreadableRequestBody(t *testing.T) {
	k := memoryKit(t)
	var runs int
	h := Middleware(k.store, quiet(Config{}))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
	}))
	broken := io.MultiReader(strings.NewReader(`{"amount":`), iotest.ErrReader(errors.New("connection reset")))
	for i, body := range []io.Reader{broken, strings.NewReader(`{"amount": 1}`)} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/x", body)
		req.Header.Set("Idempotency-Key", "k-unreadable")
		h.ServeHTTP(rec, req)
		if i == 0 {
			assert.Equal(t, http.StatusBadRequest, rec.Code)
			p, ok := wire.ReadProblem(rec.Header().Get("Content-Type"), rec.Body, 1<<16)
			require.True(t, ok, "a problem document: %s", rec.Body)
			assert.Equal(t, problemUnreadable, p.Name())
			assert.Contains(t, p.Detail, "connection reset")
			assert.Equal(t, 0, runs, "the handler does not run")
		} else {
			assert.Equal(t, http.StatusCreated, rec.Code, "the retry runs: nothing was claimed")
		}
	}
	assert.Equal(t, 1, runs)
}
