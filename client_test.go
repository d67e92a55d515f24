package idem

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The caller's request is never modified: the key goes on a clone.
func TestRoundTripDoesNotModifyRequest(t *testing.T) {
	a := &api{}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{})
	req := post(t, context.Background(), srv.URL, `{}`)
	req.Header.Set("X-Trace", "1")
	before := req.Header.Clone()

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, before, req.Header)
	assert.NotEmpty(t, resp.Request.Header.Get(KeyHeader))
	assert.Equal(t, "1", resp.Request.Header.Get("X-Trace"))
}

// The request body is closed also when nothing is sent.
func TestRequestBodyClosedOnError(t *testing.T) {
	tr, _ := newTestTransport(t, Config{})
	body := &closeCounter{Reader: strings.NewReader("x")}
	req := post(t, WithKey(context.Background(), "bad key"), "http://127.0.0.1:1/", "")
	req.Body = body
	_, err := tr.RoundTrip(req)
	require.ErrorIs(t, err, ErrKeyInvalid)
	assert.EqualValues(t, 1, body.closes.Load())
}

// net/http re-sends a keyed request by itself when a reused keep-alive
// connection breaks before the response; every such send is counted.
func TestTransportResendsAreCounted(t *testing.T) {
	a := &api{fault: func(n int, w http.ResponseWriter) bool { return n >= 2 && dropFIN(w) }}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{MaxAttempts: 2})
	warm, err := tr.RoundTrip(mustGet(t, srv.URL))
	require.NoError(t, err)
	readAll(t, warm)

	var seen []Attempt
	tr.cfg.Observer.OnAttempt = func(at Attempt) { seen = append(seen, at) }
	_, err = tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.ErrorIs(t, err, ErrAttemptsExhausted)
	require.Len(t, seen, 1, "one call of the base transport")
	assert.Equal(t, 2, seen[0].Wire, "net/http re-sent it on a new connection")
	assert.Equal(t, 2, seen[0].Number)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 2, e.Attempts)
	assert.EqualValues(t, 3, a.requests.Load(), "the warm-up and two sends")
}

// A per-attempt timeout covers the body until it is closed, not only
// RoundTrip.
func TestAttemptTimeoutEndsWhenBodyClosed(t *testing.T) {
	var attemptCtx context.Context
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		attemptCtx = r.Context()
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(strings.Repeat("b", 100))), Request: r}, nil
	})
	for _, buffered := range []int64{-1, 10} {
		tr, _ := newTestTransport(t, Config{Base: base, AttemptTimeout: time.Hour, MaxBufferedBody: buffered})
		resp, err := tr.RoundTrip(mustGet(t, "http://example.invalid/"))
		require.NoError(t, err)
		require.NoError(t, attemptCtx.Err(), "the attempt must live until the body is closed")
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Len(t, b, 100)
		resp.Body.Close()
		assert.ErrorIs(t, attemptCtx.Err(), context.Canceled, "closing the body ends the attempt")
	}
}

// A body that fits MaxBufferedBody is read ahead and the attempt ends at once.
func TestBufferedBodyEndsAttempt(t *testing.T) {
	var attemptCtx context.Context
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		attemptCtx = r.Context()
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("small")), Request: r}, nil
	})
	tr, _ := newTestTransport(t, Config{Base: base, AttemptTimeout: time.Hour})
	resp, err := tr.RoundTrip(mustGet(t, "http://example.invalid/"))
	require.NoError(t, err)
	assert.Error(t, attemptCtx.Err())
	assert.Equal(t, "small", readAll(t, resp))
}

func TestConcurrentCallsGetDistinctKeys(t *testing.T) {
	var mu sync.Mutex
	keys := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys[r.Header.Get(KeyHeader)]++
		mu.Unlock()
	}))
	defer srv.Close()
	client := NewClient(Config{})
	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{}`))
			if err != nil {
				failures.Add(1)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	assert.Zero(t, failures.Load())
	assert.Len(t, keys, 50)
	for k, n := range keys {
		assert.Equal(t, 1, n, "key %s", k)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

// The caller's body is closed when no attempt carries it: the context
// ended first, or the host's breaker is open.
func TestBodyClosedWhenNeverSent(t *testing.T) {
	t.Run("context ended", func(t *testing.T) {
		tr, _ := newTestTransport(t, Config{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		body := &closeCounter{Reader: strings.NewReader("x")}
		req := post(t, ctx, "http://api.test/pay", "")
		req.Body = body
		_, err := tr.RoundTrip(req)
		require.ErrorIs(t, err, context.Canceled)
		assert.EqualValues(t, 1, body.closes.Load())
	})
	t.Run("breaker open", func(t *testing.T) {
		host := &fakeHost{}
		host.status.Store(503)
		tr, _ := newTestTransport(t, Config{Base: host, MaxAttempts: 1, NoBudget: true, FailFast: true})
		for range defaultBreakerConsecutiveFailures {
			resp, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/pay", `{}`))
			require.NoError(t, err)
			discard(resp)
		}
		body := &closeCounter{Reader: strings.NewReader("x")}
		req := post(t, context.Background(), "http://api.test/pay", "")
		req.Body = body
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("x")), nil }
		_, err := tr.RoundTrip(req)
		require.ErrorIs(t, err, ErrCircuitOpen)
		assert.EqualValues(t, 1, body.closes.Load())
	})
}

// An observer sees each attempt's Elapsed, read from the Transport's clock;
// without one, the clock is not read for it.
func TestAttemptElapsed(t *testing.T) {
	clk := newFakeClock()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		clk.advance(250 * time.Millisecond)
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	tr, _ := newTestTransport(t, Config{Base: base})
	var reads atomic.Int32
	tr.now = func() time.Time { reads.Add(1); return clk.now() }

	resp, err := tr.RoundTrip(mustGet(t, "http://api.test/"))
	require.NoError(t, err)
	discard(resp)
	assert.Zero(t, reads.Load(), "no observer, no Retry-After: the clock is not read")

	var seen []Attempt
	tr.cfg.Observer.OnAttempt = func(at Attempt) { seen = append(seen, at) }
	resp, err = tr.RoundTrip(mustGet(t, "http://api.test/"))
	require.NoError(t, err)
	discard(resp)
	require.Len(t, seen, 1)
	assert.Equal(t, 250*time.Millisecond, seen[0].Elapsed)
}
