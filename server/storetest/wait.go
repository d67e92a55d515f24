package storetest

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

var onlyTransactional = []mode{transactional}

var waitAreas = []area{
	{"DuplicateWaitsForTheRunningRequest", onlyTransactional, testDuplicateWaits},
	{"WaitingDuplicateRunsWhenTheFirstFails", onlyTransactional, testWaiterRunsWhenTheFirstFails},
	{"CorrectedRetryWaitsForTheRejectedRequest", onlyTransactional, testCorrectedRetryWaits},
}

// gateServer mounts g behind a Transactional middleware with the given
// wait bound, as one "node" over e's store.
func (e *env) gateServer(g http.Handler, wait time.Duration) *httptest.Server {
	mux := http.NewServeMux()
	e.mount(mux, "POST /v1/payments", transactional, server.Config{WaitBound: wait}, g)
	return serve(e.t, mux)
}

func testDuplicateWaits(t *testing.T, e *env, _ mode) {
	g := newGate(e)
	patient, hasty := e.gateServer(g, time.Minute), e.gateServer(g, 50*time.Millisecond)
	first := make(chan reply)
	go func() { first <- post(t, patient, "/v1/payments", "k-wait", "{}") }()
	recv(t, g.entered)

	conflict := post(t, hasty, "/v1/payments", "k-wait", "{}")
	require.Equal(t, http.StatusConflict, conflict.status, conflict.body)
	assert.Equal(t, wire.ProblemKeyInFlight, problemName(t, conflict))
	assert.Equal(t, "1", conflict.header.Get("Retry-After"))

	waiter := make(chan reply)
	go func() { waiter <- post(t, patient, "/v1/payments", "k-wait", "{}") }()
	e.waiting(1)
	close(g.release)
	r1, r2 := recv(t, first), recv(t, waiter)
	assert.Equal(t, http.StatusCreated, r1.status)
	assert.False(t, r1.replayed())
	assert.True(t, r2.replayed(), "the waiting duplicate replays the first's result: %d %s", r2.status, r2.body)
	assert.Equal(t, r1.body, r2.body)
	assert.EqualValues(t, 1, g.runs.Load(), "handler runs")
	assert.Equal(t, 1, e.count("pay"))
}

func testWaiterRunsWhenTheFirstFails(t *testing.T, e *env, _ mode) {
	var runs atomic.Int64
	entered, release := make(chan struct{}, 2), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		assert.NoError(t, e.effect(r.Context(), "pay"))
		if n == 1 {
			entered <- struct{}{}
			hold(t, release)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	srv := e.gateServer(h, time.Minute)
	first := make(chan reply)
	go func() { first <- post(t, srv, "/v1/payments", "k-fail-wait", "{}") }()
	recv(t, entered)
	waiter := make(chan reply)
	go func() { waiter <- post(t, srv, "/v1/payments", "k-fail-wait", "{}") }()
	e.waiting(1)
	close(release)
	assert.Equal(t, http.StatusServiceUnavailable, recv(t, first).status)
	r := recv(t, waiter)
	assert.Equal(t, http.StatusCreated, r.status, "the duplicate claims the released key and runs")
	assert.False(t, r.replayed())
	assert.EqualValues(t, 2, runs.Load())
	if e.transactionalEffects(transactional) {
		assert.Equal(t, 1, e.count("pay"), "only the second run's effect persists")
	}
}

// A corrected retry that arrives while the request it corrects is still
// running waits for it, whatever its fingerprint: when the first ends in a
// rejection status the retry is processed (docs/CONTRACT.md §4), not
// refused as a reused key.
func testCorrectedRetryWaits(t *testing.T, e *env, _ mode) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if r.Header.Get("X-Amount") == "-5" {
			entered <- struct{}{}
			hold(t, release)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		assert.NoError(t, e.effect(r.Context(), "pay"))
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	e.mount(mux, "POST /v1/payments", transactional, server.Config{WaitBound: time.Minute, FingerprintHeaders: []string{"X-Amount"}}, h)
	srv := serve(t, mux)
	first := make(chan reply)
	go func() { first <- post(t, srv, "/v1/payments", "k-fix", "{}", "X-Amount", "-5") }()
	recv(t, entered)
	fixed := make(chan reply)
	go func() { fixed <- post(t, srv, "/v1/payments", "k-fix", "{}", "X-Amount", "5") }()
	e.waiting(1)
	close(release)
	assert.Equal(t, http.StatusBadRequest, recv(t, first).status)
	r := recv(t, fixed)
	assert.Equal(t, http.StatusCreated, r.status, "the corrected retry is processed: %s", r.body)
	assert.EqualValues(t, 2, runs.Load(), "handler runs")
	assert.Equal(t, 1, e.count("pay"))
}
