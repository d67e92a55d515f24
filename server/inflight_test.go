package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

func retryAfter(t *testing.T, r reply) int {
	t.Helper()
	n, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.header.Get("Retry-After"))
	return n
}
