package storetest

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/replaytest"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// config is cfg in mode m, logging nothing; a Leased route gets a 30 s
// lease unless cfg names one.
func config(m mode, cfg server.Config) server.Config {
	cfg.Mode = m.mode
	if m == leased && cfg.Lease == 0 {
		cfg.Lease = 30 * time.Second
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

// mount serves h at pattern behind a middleware over e's store in mode m.
func (e *env) mount(mux *http.ServeMux, pattern string, m mode, cfg server.Config, h http.Handler) {
	mux.Handle(pattern, server.Middleware(e.store, config(m, cfg))(h))
}

// serve starts a loopback server on h, closed when the test ends.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	return replaytest.Serve(t, h)
}

// reply is a response read in full.
type reply struct {
	status int
	header http.Header
	body   string
	err    error // the request failed: no response
}

func (r reply) replayed() bool { return r.header.Get(wire.HeaderReplayed) == "true" }

// post sends a POST to path with the key (none when "") and body; extra
// is pairs of header names and values. It may be called from any
// goroutine.
func post(t *testing.T, srv *httptest.Server, path, key, body string, extra ...string) reply {
	t.Helper()
	r := replaytest.Send(t, srv, http.MethodPost, path, key, body, extra...)
	return reply{status: r.Status, header: r.Header, body: r.Body, err: r.Err}
}

// problemName is the name of the problem document r carries.
func problemName(t *testing.T, r reply) string {
	t.Helper()
	p, ok := wire.ReadProblem(r.header.Get("Content-Type"), strings.NewReader(r.body), 1<<16)
	require.True(t, ok, "response %d %q is not a problem document", r.status, r.body)
	assert.Equal(t, r.status, p.Status, "problem status")
	return p.Name()
}

func retryAfter(t *testing.T, r reply) int {
	t.Helper()
	n, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.header.Get("Retry-After"))
	return n
}

// recv receives from ch, failing the test after 30 s instead of hanging.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	return replaytest.Recv(t, ch)
}

// hold blocks until ch is closed or the test ends, so that a failing test
// does not hang in the server's Close, which waits for its handlers.
func hold(t *testing.T, ch <-chan struct{}) {
	select {
	case <-ch:
	case <-t.Context().Done():
	}
}

// payments is the suite's handler, [replaytest.ServePayment], counting
// its runs.
type payments struct {
	e    *env
	runs atomic.Int64
}

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	replaytest.ServePayment(w, r, p.runs.Add(1), p.e.effect)
}

// payServer mounts payments at POST /v1/payments in mode m.
func (e *env) payServer(m mode, cfg server.Config) (*http.ServeMux, *payments) {
	p := &payments{e: e}
	mux := http.NewServeMux()
	cfg.ReplayHeaders = append(cfg.ReplayHeaders, "X-Trace")
	e.mount(mux, "POST /v1/payments", m, cfg, p)
	return mux, p
}

// gate is a handler that makes its effect and then holds until opened.
type gate struct {
	e       *env
	runs    atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func newGate(e *env) *gate {
	return &gate{e: e, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := g.runs.Add(1)
	if err := g.e.effect(r.Context(), "pay"); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	g.entered <- struct{}{}
	hold(g.e.t, g.release)
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, "run %d", n)
}
