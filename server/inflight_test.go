package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// gate is a handler that makes its effect and then holds until opened.
type gate struct {
	t       *testing.T
	k       *kit
	runs    atomic.Int64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(t *testing.T, k *kit) *gate {
	return &gate{t: t, k: k, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// hold blocks until ch is closed or the test ends, so that a failing test
// does not hang in the server's Close, which waits for its handlers.
func hold(t *testing.T, ch <-chan struct{}) {
	select {
	case <-ch:
	case <-t.Context().Done():
	}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := g.runs.Add(1)
	if err := g.k.effect(r.Context(), "pay"); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	g.entered <- struct{}{}
	hold(g.t, g.release)
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, "run %d", n)
}

// gateServer mounts g behind a middleware with the given wait bound, as
// one "node" over k's store.
func gateServer(t *testing.T, k *kit, g *gate, wait time.Duration) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{WaitBound: wait}))(g))
	return serve(t, mux)
}

func TestDuplicateWaitsForTheRunningRequest(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		g := newGate(t, k)
		patient := gateServer(t, k, g, time.Minute)
		hasty := gateServer(t, k, g, 50*time.Millisecond)

		first := make(chan reply)
		go func() { first <- post(t, patient, "/v1/payments", "k-wait", "{}") }()
		recv(t, g.entered)

		conflict := post(t, hasty, "/v1/payments", "k-wait", "{}")
		require.Equal(t, http.StatusConflict, conflict.status, conflict.body)
		assert.Equal(t, wire.ProblemKeyInFlight, problemName(t, conflict))
		assert.Equal(t, "1", conflict.header.Get("Retry-After"))
		assert.Contains(t, conflict.body, `"retry_after":1`)

		k.drainWaiters()
		waiter := make(chan reply)
		go func() { waiter <- post(t, patient, "/v1/payments", "k-wait", "{}") }()
		k.waitForWaiters(t, 1)
		g.open()

		r1, r2 := recv(t, first), recv(t, waiter)
		assert.Equal(t, http.StatusCreated, r1.status)
		assert.False(t, r1.replayed())
		assert.Equal(t, http.StatusCreated, r2.status, "the waiting duplicate replays the first's result")
		assert.True(t, r2.replayed())
		assert.Equal(t, r1.body, r2.body)
		assert.EqualValues(t, 1, g.runs.Load(), "handler runs")
		assert.Equal(t, 1, k.count(t, "pay"))
	})
}

func TestWaitingDuplicateRunsWhenTheFirstFails(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		var runs atomic.Int64
		entered, release := make(chan struct{}, 2), make(chan struct{})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := runs.Add(1)
			assert.NoError(t, k.effect(r.Context(), "pay"))
			if n == 1 {
				entered <- struct{}{}
				hold(t, release)
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			if tx, ok := Tx(r.Context()); ok {
				var timeout string
				assert.NoError(t, tx.QueryRow(r.Context(), `SHOW lock_timeout`).Scan(&timeout))
				assert.Equal(t, "0", timeout, "a claim that waited for the lock leaves the session's lock_timeout")
			}
			w.WriteHeader(http.StatusCreated)
		})
		mux := http.NewServeMux()
		mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{WaitBound: time.Minute}))(h))
		srv := serve(t, mux)

		first := make(chan reply)
		go func() { first <- post(t, srv, "/v1/payments", "k-fail-wait", "{}") }()
		recv(t, entered)
		waiter := make(chan reply)
		go func() { waiter <- post(t, srv, "/v1/payments", "k-fail-wait", "{}") }()
		k.waitForWaiters(t, 1)
		close(release)
		assert.Equal(t, http.StatusServiceUnavailable, recv(t, first).status)
		r := recv(t, waiter)
		assert.Equal(t, http.StatusCreated, r.status, "the duplicate claims the released key and runs")
		assert.False(t, r.replayed())
		assert.EqualValues(t, 2, runs.Load())
		if k.pool != nil {
			assert.Equal(t, 1, k.count(t, "pay"), "only the second run's effect persists")
		}
	})
}

// A corrected retry that arrives while the request it corrects is still
// running waits for it, whatever its fingerprint: when the first ends in a
// rejection status the retry is processed (docs/CONTRACT.md §4), not
// refused as a reused key.
func TestCorrectedRetryWaitsForTheRejectedRequest(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
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
			assert.NoError(t, k.effect(r.Context(), "pay"))
			w.WriteHeader(http.StatusCreated)
		})
		mux := http.NewServeMux()
		mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{WaitBound: time.Minute,
			FingerprintHeaders: []string{"X-Amount"}}))(h))
		srv := serve(t, mux)

		first := make(chan reply)
		go func() { first <- post(t, srv, "/v1/payments", "k-fix", "{}", "X-Amount", "-5") }()
		recv(t, entered)
		k.drainWaiters()
		fixed := make(chan reply)
		go func() { fixed <- post(t, srv, "/v1/payments", "k-fix", "{}", "X-Amount", "5") }()
		k.waitForWaiters(t, 1)
		close(release)
		assert.Equal(t, http.StatusBadRequest, recv(t, first).status)
		r := recv(t, fixed)
		assert.Equal(t, http.StatusCreated, r.status, "the corrected retry is processed: %s", r.body)
		assert.False(t, r.replayed())
		assert.EqualValues(t, 2, runs.Load(), "handler runs")
		assert.Equal(t, 1, k.count(t, "pay"))
	})
}

// TestStreamedResults: a response that streams (over the cap, flushed,
// hijacked) settles when it starts streaming, by its status: the
// operation's own outcome commits as result-unavailable and never runs
// again; a 5xx or a rejection status rolls back, and the retry runs afresh.
func TestStreamedResults(t *testing.T) {
	big := strings.Repeat("x", 1000)
	overTheCap := func(w http.ResponseWriter) {
		_, _ = w.Write([]byte(big[:40]))
		_, _ = w.Write([]byte(big[40:]))
	}
	flushed := func(w http.ResponseWriter) {
		_, _ = w.Write([]byte(big[:40]))
		assert.NoError(t, http.NewResponseController(w).Flush())
		_, _ = w.Write([]byte(big[40:]))
	}
	hijacked := func(w http.ResponseWriter) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		_, _ = fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(big), big)
		_ = buf.Flush()
	}
	cases := map[string]struct {
		status int // 0: the handler sets none
		write  func(w http.ResponseWriter)
		rerun  bool // rolled back: the retry runs afresh
	}{
		"200 over the cap": {0, overTheCap, false},
		"200 flushed":      {0, flushed, false},
		"200 hijacked":     {0, hijacked, false},
		"503 over the cap": {http.StatusServiceUnavailable, overTheCap, true},
		"400 flushed":      {http.StatusBadRequest, flushed, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, k *kit) {
				var runs atomic.Int64
				var mu sync.Mutex
				var unavailable []bool // of each Committed event
				hooks := Hooks{Committed: func(_ context.Context, e Event) {
					mu.Lock()
					defer mu.Unlock()
					unavailable = append(unavailable, e.Unavailable)
				}}
				committed := func() []bool { mu.Lock(); defer mu.Unlock(); return append([]bool(nil), unavailable...) }
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					assert.NoError(t, k.effect(r.Context(), "pay"))
					if runs.Add(1) > 1 {
						w.WriteHeader(http.StatusCreated)
						return
					}
					w.Header().Set("Content-Type", "text/plain")
					if tc.status != 0 {
						w.WriteHeader(tc.status)
					}
					tc.write(w)
				})
				mux := http.NewServeMux()
				mux.Handle("POST /v1/export", Middleware(k.store, quiet(Config{MaxResponseBytes: 64, Hooks: hooks}))(h))
				srv := serve(t, mux)
				first := post(t, srv, "/v1/export", "k-big", "{}")
				assert.Equal(t, max(tc.status, http.StatusOK), first.status)
				assert.Equal(t, big, first.body, "the client gets the whole streamed body")
				retry := post(t, srv, "/v1/export", "k-big", "{}")
				if tc.rerun {
					assert.Equal(t, http.StatusCreated, retry.status, "the retry runs afresh: %s", retry.body)
					assert.False(t, retry.replayed())
					assert.EqualValues(t, 2, runs.Load(), "handler runs")
					assert.Equal(t, []bool{false}, committed(), "the retry's response is stored")
				} else {
					assert.Equal(t, []bool{true}, committed(), "committed without its response")
					assert.Equal(t, http.StatusInternalServerError, retry.status)
					assert.Equal(t, wire.ProblemResultUnavailable, problemName(t, retry))
					assert.EqualValues(t, 1, runs.Load(), "the handler never runs again")
				}
				if k.pool != nil {
					assert.Equal(t, 1, k.count(t, "pay"), "one run's effects committed")
				}
			})
		})
	}
}

func retryAfter(t *testing.T, r reply) int {
	t.Helper()
	n, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.header.Get("Retry-After"))
	return n
}
