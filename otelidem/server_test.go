package otelidem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem/server"
)

// payments is a keyed API in memory: POST /v1/payments (Transactional)
// answers 201, or 400 for a negative amount; POST /v1/charges (Leased)
// waits on hold before its 201.
type payments struct {
	mux  http.Handler
	hold chan struct{}
	in   chan struct{} // a charge entered its handler
}

func newPayments(t *testing.T, s *Server, store server.Store, tm *telemetry) *payments {
	t.Helper()
	p := &payments{hold: make(chan struct{}), in: make(chan struct{}, 4)}
	cfg := server.Config{Hooks: s.Hooks(), Logger: quietLog()}
	leased := cfg
	leased.Mode = server.Leased
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", server.Middleware(store, cfg)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(readBody(r), "-") {
			http.Error(w, "negative", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})))
	mux.Handle("POST /v1/charges", server.Middleware(store, leased)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.in <- struct{}{}
		<-p.hold
		w.WriteHeader(http.StatusCreated)
	})))
	p.mux = otelhttp.NewHandler(mux, "api", otelhttp.WithTracerProvider(tm.cfg.TracerProvider),
		otelhttp.WithMeterProvider(tm.cfg.MeterProvider))
	return p
}

// do sends one request to the API in memory and returns its status.
func (p *payments) do(t *testing.T, path, key, body string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	p.mux.ServeHTTP(rec, req)
	return rec.Code
}

func route(r string) []attribute.KeyValue {
	m, pattern := splitRoute(r)
	return []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(m), semconv.HTTPRoute(pattern)}
}

// An execution, a replay, a 422, a rejection and a 409 each move the
// request counter under their verdict; claims and commits are timed, the
// request's span says its verdict and has the claim's span.
func TestServerVerdictsCounted(t *testing.T) {
	tm := newTelemetry(t)
	s, err := NewServer(tm.cfg)
	require.NoError(t, err)
	p := newPayments(t, s, server.NewMemoryStore(), tm)
	pay := route("POST /v1/payments")

	require.Equal(t, http.StatusCreated, p.do(t, "/v1/payments", "k1", `{"amount":1}`))
	require.Equal(t, http.StatusCreated, p.do(t, "/v1/payments", "k1", `{"amount":1}`))
	require.Equal(t, http.StatusUnprocessableEntity, p.do(t, "/v1/payments", "k1", `{"amount":2}`))
	require.Equal(t, http.StatusBadRequest, p.do(t, "/v1/payments", "k2", `{"amount":-1}`))
	require.Equal(t, http.StatusBadRequest, p.do(t, "/v1/payments", "", `{"amount":1}`))

	first := make(chan int)
	go func() { first <- p.do(t, "/v1/charges", "c1", `{}`) }()
	<-p.in
	require.Equal(t, http.StatusConflict, p.do(t, "/v1/charges", "c1", `{}`))
	close(p.hold)
	require.Equal(t, http.StatusCreated, <-first)

	requests := func(verdict string, more ...attribute.KeyValue) float64 {
		return tm.value(t, "idem.server.requests", append(more, keyVerdict.String(verdict))...)
	}
	assert.Equal(t, 1.0, requests(VerdictExecuted, append(pay, semconv.HTTPResponseStatusCode(201), keyMode.String("transactional"))...))
	assert.Equal(t, 1.0, requests(VerdictReplayed, append(pay, semconv.HTTPResponseStatusCode(201))...))
	assert.Equal(t, 1.0, requests(VerdictKeyReused, append(pay, semconv.HTTPResponseStatusCode(422))...))
	assert.Equal(t, 1.0, requests(VerdictRejected, append(pay, semconv.HTTPResponseStatusCode(400))...))
	assert.Equal(t, 1.0, requests(VerdictRefused, append(pay, keyProblem.String("key-missing"))...))
	charges := append(route("POST /v1/charges"), keyMode.String("leased"))
	assert.Equal(t, 1.0, requests(VerdictInFlight, append(charges, semconv.HTTPResponseStatusCode(409))...))
	assert.Equal(t, 1.0, requests(VerdictExecuted, charges...))

	assert.Equal(t, 4.0, tm.value(t, "idem.server.claim.duration", append(pay, keyVerdict.String("claimed"))...)+
		tm.value(t, "idem.server.claim.duration", append(pay, keyVerdict.String(VerdictReplayed))...)+
		tm.value(t, "idem.server.claim.duration", append(pay, keyVerdict.String(VerdictKeyReused))...),
		"the claims of k1, k1 (replayed), k1 (422) and k2")
	assert.Equal(t, 1.0, tm.value(t, "idem.server.claim.duration", append(charges, keyVerdict.String(VerdictInFlight))...))
	assert.Equal(t, 2.0, tm.value(t, "idem.server.commit.duration"), "two commits")

	var replayed bool
	for _, sp := range tm.spans.Ended() {
		if sp.SpanKind() == trace.SpanKindServer && attrsOf(sp)[keyVerdict].AsString() == VerdictReplayed {
			replayed = true
			var claims int
			for _, c := range tm.spansNamed(ClaimSpan) {
				if c.Parent().SpanID() == sp.SpanContext().SpanID() {
					claims++
				}
			}
			assert.Equal(t, 1, claims, "the replay's claim span is under its request's span")
		}
	}
	assert.True(t, replayed, "a request span says replayed")
}

// A duplicate that waited for the running request, until its wait bound
// ran out (409), counts as a wait.
func TestServerWaitCounted(t *testing.T) {
	tm := newTelemetry(t)
	s, err := NewServer(tm.cfg)
	require.NoError(t, err)
	in, hold := make(chan struct{}), make(chan struct{})
	h := server.Middleware(server.NewMemoryStore(), server.Config{Hooks: s.Hooks(), Logger: quietLog(), WaitBound: 20 * time.Millisecond})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-First") != "" {
				close(in)
				<-hold
			}
			w.WriteHeader(http.StatusCreated)
		}))
	send := func(first bool) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(`{}`))
		req.Pattern = "POST /v1/payments"
		req.Header.Set("Idempotency-Key", "k-wait")
		if first {
			req.Header.Set("X-First", "1")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	first := make(chan int)
	go func() { first <- send(true) }()
	<-in
	require.Equal(t, http.StatusConflict, send(false), "the duplicate waited its bound")
	close(hold)
	require.Equal(t, http.StatusCreated, <-first)
	assert.Equal(t, 1.0, tm.value(t, "idem.server.claim.waits", keyVerdict.String(VerdictInFlight), keyWaited.Bool(true)))
	assert.Equal(t, 1.0, tm.value(t, "idem.server.claim.waits"), "the first claim did not wait")
}

// The sweeper's, the reconciler's and the store's events: swept records,
// sweeps that failed, settlements, takeovers, tombstones, and the
// in-flight gauges.
func TestServerMaintenanceCounted(t *testing.T) {
	tm := newTelemetry(t)
	s, err := NewServer(tm.cfg)
	require.NoError(t, err)
	s.OnSweep(5, nil)
	s.OnSweep(2, errors.New("connection refused"))
	ctx := context.Background()
	op := server.Operation{Route: "POST /v1/charges", Attempt: 2}
	rh := s.ReconcileHooks()
	rh.TakenOver(ctx, server.ReconcileEvent{Operation: op})
	rh.Settled(ctx, server.ReconcileEvent{Operation: op, Answer: server.Completed, Status: 201})
	rh.Settled(ctx, server.ReconcileEvent{Operation: op, Answer: server.NotKnown, Err: errors.New("gateway down")})
	rh.Parked(ctx, server.ReconcileEvent{Operation: op})

	assert.Equal(t, 7.0, tm.value(t, "idem.server.swept"))
	assert.Equal(t, 2.0, tm.value(t, "idem.server.sweeps"))
	assert.Equal(t, 1.0, tm.value(t, "idem.server.sweeps", semconv.ErrorTypeKey.String("*errors.errorString")))
	charges := route("POST /v1/charges")
	assert.Equal(t, 1.0, tm.value(t, "idem.server.takeovers", append(charges, keyTakeoverBy.String("reconciler"))...))
	assert.Equal(t, 1.0, tm.value(t, "idem.server.reconciler.settlements", keyAnswer.String("completed")))
	assert.Equal(t, 1.0, tm.value(t, "idem.server.reconciler.settlements", keyAnswer.String("not-known")))
	assert.Equal(t, 1.0, tm.value(t, "idem.server.reconciler.settlements", keyAnswer.String("parked")))
	assert.Equal(t, 1.0, tm.value(t, "idem.server.tombstones", keyTombstoneBy.String("reconciler")))
}

// The in-flight gauges ask the store at each collection.
func TestInFlightGauges(t *testing.T) {
	tm := newTelemetry(t)
	s, err := NewServer(tm.cfg)
	require.NoError(t, err)
	store := server.NewMemoryStore()
	reg, err := s.ObserveStore(store)
	require.NoError(t, err)
	p := newPayments(t, s, store, tm)
	assert.Equal(t, 0.0, tm.value(t, "idem.server.inflight"))
	done := make(chan int)
	go func() { done <- p.do(t, "/v1/charges", "c-gauge", `{}`) }()
	<-p.in
	assert.Equal(t, 1.0, tm.value(t, "idem.server.inflight"), "the charge is in flight")
	assert.Len(t, tm.points(t, "idem.server.inflight.oldest_age"), 1)
	close(p.hold)
	require.Equal(t, http.StatusCreated, <-done)
	assert.Equal(t, 0.0, tm.value(t, "idem.server.inflight"))
	require.NoError(t, reg.Unregister())
	assert.Empty(t, tm.points(t, "idem.server.inflight"), "unregistered")
}

// With the middleware around the mux, r.Pattern is empty and package
// server names each request's route by its raw path: http.route is then
// left out (never a raw path), so 200 distinct ids make one series per
// instrument, and made-up paths and methods add no series of their own.
func TestServerRouteWithoutAPattern(t *testing.T) {
	tm := newTelemetry(t)
	s, err := NewServer(tm.cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/payments/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	h := server.Middleware(server.NewMemoryStore(), server.Config{Hooks: s.Hooks(), Logger: quietLog()})(mux)
	send := func(method, path, key string) int {
		req := httptest.NewRequest(method, path, strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range 200 {
		require.Equal(t, http.StatusCreated, send(http.MethodPost, fmt.Sprintf("/v1/payments/p%d", i), fmt.Sprintf("k%d", i)))
	}
	instruments := []string{"idem.server.requests", "idem.server.claim.duration", "idem.server.commit.duration"}
	for _, name := range instruments {
		points := tm.points(t, name)
		require.Equal(t, 1, len(points), "%s: one series for 200 ids", name)
		_, hasRoute := points[0].attrs.Value(semconv.HTTPRouteKey)
		assert.False(t, hasRoute, "%s: no http.route without a pattern", name)
		m, _ := points[0].attrs.Value(semconv.HTTPRequestMethodKey)
		assert.Equal(t, "POST", m.AsString(), name)
	}

	for i := range 50 {
		require.Equal(t, http.StatusNotFound, send(http.MethodPost, fmt.Sprintf("/made-up/%d", i), fmt.Sprintf("m%d", i)))
		require.Equal(t, http.StatusMethodNotAllowed, send(fmt.Sprintf("INVENTED%d", i), "/v1/payments/x", fmt.Sprintf("i%d", i)))
	}
	assert.Equal(t, 3, len(tm.points(t, "idem.server.requests")), "executed 201 and rejected 404 by POST, rejected 405 by _OTHER: whatever the paths and methods")
	assert.Equal(t, 2, len(tm.points(t, "idem.server.claim.duration")), "claimed, by POST and by _OTHER")
	for _, name := range instruments {
		for _, p := range tm.points(t, name) {
			_, hasRoute := p.attrs.Value(semconv.HTTPRouteKey)
			assert.False(t, hasRoute, "%s: %v", name, p.attrs)
		}
	}
}

func TestSplitRoute(t *testing.T) {
	tests := []struct{ route, method, pattern string }{
		{"POST /v1/payments/{id}", "POST", "/v1/payments/{id}"},
		{"PATCH  example.com/v1/x", "PATCH", "example.com/v1/x"},
		{"INVENTED /v1/payments/{id}", "_OTHER", "/v1/payments/{id}"}, // a pattern without a method takes any
		{"charge", "", "charge"},
		{"create payment", "", "create payment"},
		{"POST charges", "POST", "charges"},
		{" /v1/x", "", " /v1/x"},
	}
	for _, tt := range tests {
		m, p := splitRoute(tt.route)
		assert.Equal(t, tt.method, m, tt.route)
		assert.Equal(t, tt.pattern, p, tt.route)
	}
}
