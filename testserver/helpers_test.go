package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when a test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{}
}

type fakeTimer struct {
	d       time.Duration
	at      time.Time
	c       chan time.Time
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{d: d, at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
		return t.c, func() bool { return false }
	}
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return t.c, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.c <- c.now
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

// waitTimers blocks until n timers are pending (goroutines are sleeping).
func (c *fakeClock) waitTimers(t *testing.T, n int) {
	t.Helper()
	c.waitFor(t, fmt.Sprintf("%d timers", n), func(d time.Duration) bool { return true }, n)
}

// waitTimer blocks until a timer of duration d is pending.
func (c *fakeClock) waitTimer(t *testing.T, d time.Duration) {
	t.Helper()
	c.waitFor(t, "a timer of "+d.String(), func(td time.Duration) bool { return td == d }, 1)
}

// waitFor blocks (at most 10s) until n pending timers satisfy ok.
func (c *fakeClock) waitFor(t *testing.T, what string, ok func(time.Duration) bool, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		pending := 0
		for _, tm := range c.timers {
			if !tm.stopped && ok(tm.d) {
				pending++
			}
		}
		changed := c.changed
		c.mu.Unlock()
		if pending >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("waiting for %s: none pending after 10s", what)
		}
	}
}

// app is a handler under test: every call is one business effect, recorded
// in its ledger under the request's operation id, answered 201 with the
// payment id.
type app struct {
	calls  atomic.Int64
	ledger Ledger
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n := a.calls.Add(1)
	info, _ := InfoFrom(r.Context())
	id := fmt.Sprintf("pay-%d", n)
	a.ledger.Record(info.Op, id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%q,"request_bytes":%d,"pad":%q}`, id, len(body), strings.Repeat("x", 40))
}

// startServer starts a Server on the given clock (nil: the real one) and
// closes it when the test ends.
func startServer(t *testing.T, h http.Handler, cfg Config, clk clock) *Server {
	t.Helper()
	if clk == nil {
		clk = realClock{}
	}
	s, err := start(h, nil, cfg, clk)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// freshClient returns a client that opens a new connection per request, so
// that net/http never retries on its own, with the given timeout.
func freshClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

// post sends a POST with an Idempotency-Key (when key is not empty) and
// returns the response with its body read.
func post(c *http.Client, url, key, body string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return resp, got, err
}

// waitEvents waits (at most 10s) for n events.
func waitEvents(t *testing.T, s *Server, n int) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := s.WaitEvents(ctx, n)
	if err != nil {
		t.Fatalf("WaitEvents(%d): %v; have %d events", n, err, len(events))
	}
	return events
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
