package idem

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// clock is an injected sleep that records each wait and returns at once.
type clock struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (c *clock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// newTestTransport returns a Transport whose waits return at once (recorded
// in the returned clock) and whose jitter draws 0.5.
func newTestTransport(t *testing.T, cfg Config) (*Transport, *clock) {
	t.Helper()
	tr := NewTransport(cfg)
	clk := &clock{}
	tr.sleep = clk.sleep
	tr.rand = func() float64 { return 0.5 }
	if base, ok := tr.cfg.Base.(*http.Transport); ok {
		t.Cleanup(base.CloseIdleConnections)
	}
	return tr, clk
}

// api is an idempotent test API: a keyed POST runs once per key (one
// effect) and its response is replayed to later requests with the key.
// A fault can act on any request by number (1-based) after it ran.
type api struct {
	mu       sync.Mutex
	results  map[string]string // key -> response body
	effects  atomic.Int32
	requests atomic.Int32
	keys     chan string // every key received, when non-nil
	// fault, when set, may take over request n after the handler ran; it
	// returns true when it did.
	fault func(n int, w http.ResponseWriter) bool
	// before, when set, may answer request n instead of the handler.
	before func(n int, w http.ResponseWriter) bool
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(a.requests.Add(1))
	io.Copy(io.Discard, r.Body)
	key := r.Header.Get(KeyHeader)
	if a.keys != nil {
		a.keys <- key
	}
	if a.before != nil && a.before(n, w) {
		return
	}
	body, replayed := a.execute(key)
	if a.fault != nil && a.fault(n, w) {
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, body)
}

func (a *api) execute(key string) (body string, replayed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b, ok := a.results[key]; ok && key != "" {
		return b, true
	}
	body = fmt.Sprintf(`{"payment_id":%d}`, a.effects.Add(1))
	if a.results == nil {
		a.results = map[string]string{}
	}
	a.results[key] = body
	return body, false
}

func (a *api) start(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return srv
}

// dropFIN closes the connection without a response (a FIN).
func dropFIN(w http.ResponseWriter) bool {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
	return true
}

// dropRST aborts the connection without a response (an RST).
func dropRST(w http.ResponseWriter) bool {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
	return true
}

// refusedAddr returns a loopback address where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// refusingFirst returns a base transport whose first n dials are refused
// (they go to a closed port) and whose later dials go where they should.
func refusingFirst(t *testing.T, n int) (*http.Transport, *atomic.Int32) {
	t.Helper()
	closed := refusedAddr(t)
	var dials atomic.Int32
	var d net.Dialer
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if int(dials.Add(1)) <= n {
			addr = closed
		}
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(base.CloseIdleConnections)
	return base, &dials
}

func post(t *testing.T, ctx context.Context, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return string(b)
}

// writeProblem answers a contract problem with the default prefix.
func writeProblem(w http.ResponseWriter, status int, name string) {
	wire.WriteProblem(w, wire.Problem{Type: wire.DefaultProblemPrefix + name, Title: name, Status: status})
}

// refusingAfter returns a base transport whose first n dials go where they
// should and whose later dials are refused (they go to a closed port).
func refusingAfter(t *testing.T, n int) (*http.Transport, *atomic.Int32) {
	t.Helper()
	closed := refusedAddr(t)
	var dials atomic.Int32
	var d net.Dialer
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if int(dials.Add(1)) > n {
			addr = closed
		}
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(base.CloseIdleConnections)
	return base, &dials
}
