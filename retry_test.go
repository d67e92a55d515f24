package idem

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// Acceptance 1: a keyed POST whose response is dropped after the server ran
// it is retried with the same key, takes effect once, and returns the replay.
func TestDroppedResponseRetriedWithSameKey(t *testing.T) {
	for _, drop := range []struct {
		name string
		fn   func(http.ResponseWriter) bool
	}{{"FIN", dropFIN}, {"RST", dropRST}} {
		t.Run(drop.name, func(t *testing.T) {
			a := &api{keys: make(chan string, 10)}
			a.fault = func(n int, w http.ResponseWriter) bool { return n == 1 && drop.fn(w) }
			srv := a.start(t)
			tr, clk := newTestTransport(t, Config{})

			resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{"amount":100}`))
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			assert.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
			assert.Equal(t, `{"payment_id":1}`, readAll(t, resp))
			assert.EqualValues(t, 1, a.effects.Load(), "effects")
			assert.EqualValues(t, 2, a.requests.Load(), "requests")
			k1, k2 := <-a.keys, <-a.keys
			assert.NotEmpty(t, k1)
			assert.Equal(t, k1, k2, "the retry must carry the first attempt's key")
			assert.Equal(t, k1, resp.Request.Header.Get(KeyHeader))
			assert.Len(t, clk.Waits(), 1)
		})
	}
}

// Acceptance 2a: an opted-out POST is not retried after an ambiguous failure.
func TestUnkeyedPOSTNotRetriedWhenAmbiguous(t *testing.T) {
	a := &api{fault: func(n int, w http.ResponseWriter) bool { return dropFIN(w) }}
	srv := a.start(t)
	tr, clk := newTestTransport(t, Config{})

	_, err := tr.RoundTrip(post(t, WithoutKey(context.Background()), srv.URL, `{}`))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrOutcomeUnknown)
	assert.Contains(t, err.Error(), "outcome unknown")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Ambiguous, e.Certainty)
	assert.True(t, e.MayHaveTakenEffect)
	assert.Equal(t, 1, e.Attempts)
	assert.Empty(t, e.Key)
	assert.EqualValues(t, 1, a.requests.Load(), "requests")
	assert.Empty(t, clk.Waits())
}

// Acceptance 2b: the same unkeyed POST is retried after a refused connection.
func TestUnkeyedPOSTRetriedWhenNotSent(t *testing.T) {
	a := &api{keys: make(chan string, 10)}
	srv := a.start(t)
	base, dials := refusingFirst(t, 1)
	tr, _ := newTestTransport(t, Config{Base: base})

	var certainties []Certainty
	tr.cfg.Observer.OnAttempt = func(at Attempt) { certainties = append(certainties, at.Certainty) }
	resp, err := tr.RoundTrip(post(t, WithoutKey(context.Background()), srv.URL, `{"a":1}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	readAll(t, resp)
	assert.Equal(t, []Certainty{NotSent, Responded}, certainties)
	assert.EqualValues(t, 2, dials.Load(), "dials")
	assert.EqualValues(t, 1, a.requests.Load(), "requests reaching the server")
	assert.Empty(t, <-a.keys, "an opted-out request must carry no key")
}

// Acceptance 3: a Retry-After that the deadline cannot cover ends the call at
// once, with an error naming both.
func TestRetryAfterPastDeadlineGivesUpAtOnce(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool {
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	}}
	srv := a.start(t)
	tr, clk := newTestTransport(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()

	_, err := tr.RoundTrip(post(t, ctx, srv.URL, `{}`))
	require.ErrorIs(t, err, ErrDeadline)
	assert.NoError(t, ctx.Err(), "the call must return before the deadline, not at it")
	assert.Empty(t, clk.Waits(), "no wait may start")
	assert.Contains(t, err.Error(), "Retry-After 5s")
	assert.Contains(t, err.Error(), "deadline")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusServiceUnavailable, e.Status)
	assert.Equal(t, 5*time.Second, e.RetryAfter)
	assert.EqualValues(t, 1, a.requests.Load())
}

// Acceptance 5: a body without GetBody is never re-sent once written.
func TestBodyWithoutGetBodyNotResent(t *testing.T) {
	a := &api{fault: func(n int, w http.ResponseWriter) bool { return dropFIN(w) }}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{})
	req := post(t, context.Background(), srv.URL, "")
	req.Body = io.NopCloser(strings.NewReader(`{"amount":1}`))
	req.GetBody = nil
	req.ContentLength = -1

	_, err := tr.RoundTrip(req)
	require.ErrorIs(t, err, ErrNotRewindable)
	assert.ErrorIs(t, err, ErrOutcomeUnknown, "the written request may have acted")
	assert.Contains(t, err.Error(), "GetBody")
	assert.EqualValues(t, 1, a.requests.Load(), "requests")
}

// A body without GetBody that was never written is sent on the next attempt.
func TestBodyWithoutGetBodyResentWhenNotSent(t *testing.T) {
	var got atomic.Value
	var seen atomic.Int32
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		seen.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv2.Close()
	base, _ := refusingFirst(t, 2)
	tr, _ := newTestTransport(t, Config{Base: base})
	body := &closeCounter{Reader: strings.NewReader("payload")}
	req := post(t, context.Background(), srv2.URL, "")
	req.Body, req.GetBody, req.ContentLength = body, nil, 7

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, "payload", got.Load())
	assert.EqualValues(t, 1, seen.Load())
	assert.EqualValues(t, 1, body.closes.Load(), "the caller's body must be closed exactly once")
}

// Acceptance 6: 422 key-reused is a typed error after one attempt.
func TestKeyReusedIsTypedError(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool {
		wire.WriteProblem(w, wire.Problem{Type: wire.DefaultProblemPrefix + wire.ProblemKeyReused, Title: "reused", Status: 422})
		return true
	}}
	srv := a.start(t)
	tr, clk := newTestTransport(t, Config{})

	_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.ErrorIs(t, err, ErrKeyReused)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 1, e.Attempts)
	assert.Equal(t, 422, e.Status)
	assert.False(t, e.MayHaveTakenEffect)
	assert.NotErrorIs(t, err, ErrOutcomeUnknown)
	assert.Empty(t, clk.Waits())
	assert.EqualValues(t, 1, a.requests.Load())
}

func TestContractProblemsAreTypedErrors(t *testing.T) {
	tests := []struct {
		status  int
		problem string
		want    error
		acted   bool
	}{
		{400, wire.ProblemKeyMissing, ErrKeyMissing, false},
		{400, wire.ProblemKeyInvalid, ErrKeyInvalid, false},
		{500, wire.ProblemResultUnavailable, ErrResultUnavailable, true},
	}
	for _, tt := range tests {
		t.Run(tt.problem, func(t *testing.T) {
			a := &api{before: func(n int, w http.ResponseWriter) bool {
				wire.WriteProblem(w, wire.Problem{Type: "https://api.example/problems/" + tt.problem, Status: tt.status})
				return true
			}}
			srv := a.start(t)
			tr, _ := newTestTransport(t, Config{})
			_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
			require.ErrorIs(t, err, tt.want)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tt.acted, e.MayHaveTakenEffect)
			assert.EqualValues(t, 1, a.requests.Load(), "never retried")
		})
	}
}

// An application's own 400/409/422 problem is the caller's response.
func TestApplicationProblemReturned(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool {
		wire.WriteProblem(w, wire.Problem{Type: "https://api.example/insufficient-funds", Status: 409, Detail: "no"})
		return true
	}}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{})
	resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.NoError(t, err)
	assert.Equal(t, 409, resp.StatusCode)
	assert.Contains(t, readAll(t, resp), "insufficient-funds", "the peeked body must be given back whole")
}

func TestKeyInFlightWaitsRetryAfterWithSameKey(t *testing.T) {
	a := &api{keys: make(chan string, 10)}
	a.before = func(n int, w http.ResponseWriter) bool {
		if n > 2 {
			return false
		}
		w.Header().Set("Retry-After", "2")
		wire.WriteProblem(w, wire.Problem{Type: wire.DefaultProblemPrefix + wire.ProblemKeyInFlight, Status: 409, RetryAfter: 2})
		return true
	}
	srv := a.start(t)
	tr, clk := newTestTransport(t, Config{})
	resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	readAll(t, resp)
	assert.Equal(t, []time.Duration{2 * time.Second, 2 * time.Second}, clk.Waits())
	k := <-a.keys
	assert.Equal(t, k, <-a.keys)
	assert.Equal(t, k, <-a.keys)
}

// A 409 key-in-flight on the last attempt says that an attempt of the key
// still runs: the call ends with ErrKeyInFlight even when no earlier
// attempt may have acted (one attempt allowed, or a 429 before it).
func TestKeyInFlightOnTheLastAttempt(t *testing.T) {
	inFlight := func(w http.ResponseWriter) {
		wire.WriteProblem(w, wire.Problem{Type: wire.DefaultProblemPrefix + wire.ProblemKeyInFlight, Status: 409})
	}
	for name, tt := range map[string]struct {
		attempts int
		first    func(w http.ResponseWriter)
	}{
		"only attempt": {1, inFlight},
		"after a 429":  {2, func(w http.ResponseWriter) { w.WriteHeader(http.StatusTooManyRequests) }},
	} {
		t.Run(name, func(t *testing.T) {
			a := &api{before: func(n int, w http.ResponseWriter) bool {
				if n == 1 {
					tt.first(w)
				} else {
					inFlight(w)
				}
				return true
			}}
			srv := a.start(t)
			tr, _ := newTestTransport(t, Config{MaxAttempts: tt.attempts})
			resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
			assert.Nil(t, resp)
			require.ErrorIs(t, err, ErrKeyInFlight)
			assert.ErrorIs(t, err, ErrOutcomeUnknown)
		})
	}
}

func TestKeyInFlightExhausted(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool {
		wire.WriteProblem(w, wire.Problem{Type: wire.DefaultProblemPrefix + wire.ProblemKeyInFlight, Status: 409})
		return true
	}}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{MaxAttempts: 3})
	_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.ErrorIs(t, err, ErrKeyInFlight)
	assert.ErrorIs(t, err, ErrOutcomeUnknown)
	assert.EqualValues(t, 3, a.requests.Load())
}

func TestRetryableStatuses(t *testing.T) {
	for _, code := range []int{408, 429, 500, 502, 503, 504} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			a := &api{before: func(n int, w http.ResponseWriter) bool {
				if n == 1 {
					w.WriteHeader(code)
					return true
				}
				return false
			}}
			srv := a.start(t)
			tr, clk := newTestTransport(t, Config{})
			resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			readAll(t, resp)
			// Backoff for retry 0 with u = 0.5: half of the 100 ms base.
			assert.Equal(t, []time.Duration{50 * time.Millisecond}, clk.Waits())
		})
	}
}

func TestNonRetryableStatusesReturned(t *testing.T) {
	for _, code := range []int{200, 201, 301, 400, 401, 402, 404, 409, 422, 501} {
		a := &api{before: func(n int, w http.ResponseWriter) bool { w.WriteHeader(code); return true }}
		srv := a.start(t)
		tr, _ := newTestTransport(t, Config{})
		req := post(t, context.Background(), srv.URL, `{}`)
		resp, err := (&http.Client{Transport: tr, CheckRedirect: noRedirect}).Do(req)
		require.NoError(t, err, "status %d", code)
		assert.Equal(t, code, resp.StatusCode)
		readAll(t, resp)
		assert.EqualValues(t, 1, a.requests.Load(), "status %d must not be retried", code)
	}
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func TestRetryAfterHonouredAndClamped(t *testing.T) {
	// The transport reads an HTTP date on a clock pinned here, so that the
	// date's wait is exact however long the machine takes to get there.
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		header string
		max    time.Duration
		want   time.Duration
	}{
		{"3", 0, 3 * time.Second},
		{"120", 0, defaultMaxRetryAfter},
		{"120", 10 * time.Second, 10 * time.Second},
		{now.Add(4 * time.Second).Format(http.TimeFormat), 0, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			a := &api{before: func(n int, w http.ResponseWriter) bool {
				if n == 1 {
					w.Header().Set("Retry-After", tt.header)
					w.WriteHeader(http.StatusTooManyRequests)
					return true
				}
				return false
			}}
			srv := a.start(t)
			tr, clk := newTestTransport(t, Config{MaxRetryAfter: tt.max})
			tr.now = func() time.Time { return now }
			resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
			require.NoError(t, err)
			readAll(t, resp)
			require.Len(t, clk.Waits(), 1)
			assert.Equal(t, tt.want, clk.Waits()[0], "wait")
		})
	}
}

// When every attempt was refused (429), the last response is returned.
func TestExhaustedReturnsLastRefusal(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool {
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "slow down")
		return true
	}}
	srv := a.start(t)
	tr, clk := newTestTransport(t, Config{MaxAttempts: 3})
	resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "slow down", readAll(t, resp))
	assert.EqualValues(t, 3, a.requests.Load())
	assert.Equal(t, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}, clk.Waits())
}

// When an attempt may have acted (a 5xx, or a response lost after the
// handler ran), a final refusal says nothing of the outcome: the call ends
// with an error that says it may have taken effect.
func TestExhaustedAfterPossibleEffectIsUnknown(t *testing.T) {
	tests := []struct {
		name  string
		first func(w http.ResponseWriter) bool
		last  int
	}{
		{"503s", func(w http.ResponseWriter) bool { w.WriteHeader(503); return true }, 503},
		{"dropped, then 429", dropFIN, 429},
		{"502, then 408", func(w http.ResponseWriter) bool { w.WriteHeader(502); return true }, 408},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &api{}
			a.fault = func(n int, w http.ResponseWriter) bool {
				if n == 1 {
					return tt.first(w)
				}
				w.WriteHeader(tt.last)
				return true
			}
			srv := a.start(t)
			tr, _ := newTestTransport(t, Config{MaxAttempts: 2})
			_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
			require.ErrorIs(t, err, ErrAttemptsExhausted)
			assert.ErrorIs(t, err, ErrOutcomeUnknown)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tt.last, e.Status)
			assert.EqualValues(t, 1, a.effects.Load(), "the first attempt ran the handler")
		})
	}
}

func TestExhaustedTransportErrors(t *testing.T) {
	a := &api{fault: func(n int, w http.ResponseWriter) bool { return dropRST(w) }}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{MaxAttempts: 2})
	_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.ErrorIs(t, err, ErrAttemptsExhausted)
	assert.ErrorIs(t, err, ErrOutcomeUnknown)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 2, e.Attempts)
	assert.EqualValues(t, 2, a.requests.Load())
	assert.NotEmpty(t, e.Key)
}

func TestCallerCancelStopsRetries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := &api{before: func(n int, w http.ResponseWriter) bool {
		cancel()
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	}}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{})
	_, err := tr.RoundTrip(post(t, ctx, srv.URL, `{}`))
	require.ErrorIs(t, err, context.Canceled)
	assert.EqualValues(t, 1, a.requests.Load())
}

func TestIdempotentMethodRetriedWithoutKey(t *testing.T) {
	a := &api{keys: make(chan string, 10), fault: func(n int, w http.ResponseWriter) bool { return n == 1 && dropFIN(w) }}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{})
	req, _ := http.NewRequest(http.MethodPut, srv.URL, strings.NewReader(`{"balance":1}`))
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.EqualValues(t, 2, a.requests.Load())
	assert.Empty(t, <-a.keys, "PUT gets no generated key")
}

// A body cut short (Content-Length declared, connection closed) is an
// ambiguous attempt, retried for a keyed request.
func TestCutShortBodyRetried(t *testing.T) {
	a := &api{fault: func(n int, w http.ResponseWriter) bool {
		if n != 1 {
			return false
		}
		conn, buf, _ := http.NewResponseController(w).Hijack()
		buf.WriteString("HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{\"pay")
		buf.Flush()
		conn.Close()
		return true
	}}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{})
	var seen []Attempt
	tr.cfg.Observer.OnAttempt = func(at Attempt) { seen = append(seen, at) }
	resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.NoError(t, err)
	assert.Equal(t, `{"payment_id":1}`, readAll(t, resp))
	require.Len(t, seen, 2)
	assert.Equal(t, Ambiguous, seen[0].Certainty)
	assert.Equal(t, 201, seen[0].Status)
	assert.ErrorIs(t, seen[0].Err, io.ErrUnexpectedEOF)
	assert.EqualValues(t, 1, a.effects.Load())
}

// An attempt that outlives AttemptTimeout is retried.
func TestAttemptTimeoutRetried(t *testing.T) {
	release := make(chan struct{})
	a := &api{fault: func(n int, w http.ResponseWriter) bool {
		if n == 1 {
			<-release // hang until the client gave up on this attempt
			return true
		}
		return false
	}}
	srv := a.start(t)
	defer close(release)
	tr, _ := newTestTransport(t, Config{AttemptTimeout: 50 * time.Millisecond})
	var first Attempt
	tr.cfg.Observer.OnRetry = func(at Attempt, _ time.Duration) { first = at }
	resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, Ambiguous, first.Certainty)
	assert.ErrorIs(t, first.Err, context.DeadlineExceeded)
}

// Discarded responses are drained, so the retry reuses the connection.
func TestDiscardedResponseDrainedConnectionReused(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, strings.Repeat("x", 2000))
			return true
		}
		return false
	}}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{})
	var reused []bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) },
	})
	resp, err := tr.RoundTrip(post(t, ctx, srv.URL, `{}`))
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, []bool{false, true}, reused)
}

// closeCounter is a request body without GetBody that counts its closes.
type closeCounter struct {
	io.Reader
	closes atomic.Int32
}

func (c *closeCounter) Close() error {
	c.closes.Add(1)
	return nil
}
