package idem

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type sendKey struct{}

// sends records what OnSend and its done function were told, and marks each
// attempt's context with the attempt's number.
type sends struct {
	mu    sync.Mutex
	sent  []Attempt
	ended []Attempt
}

func (s *sends) onSend(ctx context.Context, a Attempt) (context.Context, func(Attempt)) {
	s.mu.Lock()
	s.sent = append(s.sent, a)
	s.mu.Unlock()
	return context.WithValue(ctx, sendKey{}, a.Number), func(end Attempt) {
		s.mu.Lock()
		s.ended = append(s.ended, end)
		s.mu.Unlock()
	}
}

func (s *sends) report() (sent, ended []Attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Attempt(nil), s.sent...), append([]Attempt(nil), s.ended...)
}

// OnSend is told of each attempt before it is sent, with its number and
// why it re-sends the request; the base transport runs it under the
// context OnSend returned; done gets each attempt's outcome.
func TestOnSendWrapsEachAttempt(t *testing.T) {
	statuses := []int{503, 429, 201}
	var seenNumbers []any
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seenNumbers = append(seenNumbers, r.Context().Value(sendKey{}))
		n := len(seenNumbers)
		h := http.Header{}
		if n == 2 {
			h.Set("Retry-After", "2")
		}
		return &http.Response{StatusCode: statuses[n-1], Header: h, Body: http.NoBody, Request: r}, nil
	})
	var rec sends
	var attempts []Attempt
	tr, clk := newTestTransport(t, Config{Base: base, NoBudget: true, Observer: Observer{
		OnSend:    rec.onSend,
		OnAttempt: func(a Attempt) { attempts = append(attempts, a) },
	}})
	resp, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/pay", "{}"))
	require.NoError(t, err)
	resp.Body.Close()

	assert.Equal(t, []any{1, 2, 3}, seenNumbers, "each attempt is sent under OnSend's context")
	waits := clk.Waits()
	require.Len(t, waits, 2)
	assert.Equal(t, 2*time.Second, waits[1], "Retry-After")
	sent, ended := rec.report()
	require.Len(t, sent, 3)
	want := []Resend{{}, {Certainty: Responded, Status: 503, Wait: waits[0]}, {Certainty: Responded, Status: 429, Wait: waits[1]}}
	for i, a := range sent {
		assert.Equal(t, i+1, a.Number, "attempt %d's number", i+1)
		assert.Equal(t, want[i], a.Resend, "attempt %d's resend", i+1)
		assert.NotEmpty(t, a.Key)
		assert.Zero(t, a.Status, "nothing is known of the outcome before the send")
	}
	require.Len(t, ended, 3)
	require.Len(t, attempts, 3)
	for i, a := range ended {
		assert.Equal(t, statuses[i], a.Status)
		assert.Equal(t, Responded, a.Certainty)
		assert.Equal(t, i+1, a.Number)
		assert.Equal(t, want[i], a.Resend)
		assert.Equal(t, want[i], attempts[i].Resend, "OnAttempt sees the resend too")
		assert.Equal(t, i+1, attempts[i].Request.Context().Value(sendKey{}), "OnAttempt's request is the one sent")
	}
}

// An attempt that was not sent has the count of the requests sent before
// it: a retry the breaker refused after one 503 is 1 in OnAttempt and
// OnGiveUp, and carries the Resend of the retry; so is a hedge whose body
// could not be built while the first attempt ran, which re-sends nothing.
func TestUnsentAttemptNumbers(t *testing.T) {
	calls := 0
	var seen, gaveUp []Attempt
	tr, _ := newTestTransport(t, Config{Base: statusBase(&calls, "", nil, 503), MaxAttempts: 3,
		Backoff: Backoff{Base: time.Nanosecond}, Breaker: BreakerConfig{ConsecutiveFailures: 1}, FailFast: true,
		Observer: Observer{OnAttempt: func(a Attempt) { seen = append(seen, a) },
			OnGiveUp: func(a Attempt, _ error) { gaveUp = append(gaveUp, a) }}})
	_, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/", `{}`))
	require.ErrorIs(t, err, ErrCircuitOpen)
	require.Len(t, seen, 2)
	assert.Equal(t, []int{1, 1}, []int{seen[0].Number, seen[1].Number})
	assert.Equal(t, NotSent, seen[1].Certainty)
	assert.Equal(t, 503, seen[1].Resend.Status, "the refused retry says what it retried")
	require.Len(t, gaveUp, 1)
	assert.Equal(t, 1, gaveUp[0].Number)

	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(time.Hour)}
		var seen []Attempt
		tr := NewTransport(Config{Base: base, NoBudget: true, Hedge: HedgeConfig{Delay: 10 * time.Millisecond},
			Observer: Observer{OnAttempt: func(a Attempt) { seen = append(seen, a) }}})
		req, err := http.NewRequest(http.MethodPut, "http://api.test/item", strings.NewReader("x"))
		require.NoError(t, err)
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("GetBody") }
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err, "the call waits for its first attempt")
		discard(resp)
		require.Len(t, seen, 2)
		hedge := seen[0]
		assert.True(t, hedge.Hedge)
		assert.Equal(t, NotSent, hedge.Certainty)
		assert.Equal(t, 1, hedge.Number, "the first attempt was on the wire")
		assert.Zero(t, hedge.Resend)
		assert.Equal(t, 1, seen[1].Number, "the first attempt")
	})
}

// An attempt that lost a hedged race ends in done too, though OnAttempt
// never sees it; the hedge re-sends nothing.
func TestOnSendDoneForHedgeLoser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(time.Hour)}
		var rec sends
		tr := NewTransport(Config{Base: base, Hedge: HedgeConfig{Delay: 10 * time.Millisecond},
			Observer: Observer{OnSend: rec.onSend}})
		resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
		require.NoError(t, err)
		readAll(t, resp)
		synctest.Wait()

		sent, ended := rec.report()
		require.Len(t, sent, 2)
		assert.False(t, sent[0].Hedge)
		assert.True(t, sent[1].Hedge)
		assert.Equal(t, 2, sent[1].Number)
		assert.Zero(t, sent[1].Resend)
		require.Len(t, ended, 2, "the loser's attempt ends too")
		assert.True(t, ended[0].Hedge, "the hedge won first")
		assert.False(t, ended[1].Hedge)
		assert.ErrorIs(t, ended[1].Err, context.Canceled)
	})
}

// An attempt that the host's open breaker refuses is not sent: OnSend is
// not told of it.
func TestOnSendNotToldOfRefusedAttempt(t *testing.T) {
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	var rec sends
	tr, _ := newTestTransport(t, Config{Base: base, NoBudget: true, MaxAttempts: 1,
		Breaker: BreakerConfig{ConsecutiveFailures: 1}, FailFast: true,
		Observer: Observer{OnSend: rec.onSend}})
	for range 2 {
		resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
		if err == nil {
			resp.Body.Close()
		}
	}
	sent, ended := rec.report()
	assert.Len(t, sent, 1, "the second call's attempt was refused by the open breaker")
	assert.Len(t, ended, 1)
}

// A retry that the host's open breaker refuses is still a retry: OnAttempt
// and OnGiveUp see why it re-sends the request, as for one sent.
func TestResendOfRefusedRetry(t *testing.T) {
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	var attempts []Attempt
	var gaveUp Attempt
	tr, clk := newTestTransport(t, Config{Base: base, NoBudget: true, MaxAttempts: 2,
		Breaker: BreakerConfig{ConsecutiveFailures: 1}, FailFast: true,
		Observer: Observer{
			OnAttempt: func(a Attempt) { attempts = append(attempts, a) },
			OnGiveUp:  func(a Attempt, _ error) { gaveUp = a },
		}})
	_, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
	require.ErrorIs(t, err, ErrCircuitOpen)
	waits := clk.Waits()
	require.Len(t, waits, 1)
	require.Len(t, attempts, 2)
	want := Resend{Certainty: Responded, Status: 503, Wait: waits[0]}
	assert.Zero(t, attempts[0].Resend, "the first attempt")
	assert.Equal(t, want, attempts[1].Resend, "the refused retry's resend")
	assert.Equal(t, want, gaveUp.Resend, "OnGiveUp's attempt is the refused retry")
}
