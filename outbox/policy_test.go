package outbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoff(t *testing.T) {
	const minB, maxB = 100 * time.Millisecond, 10 * time.Second
	tests := []struct {
		n          int
		retryAfter time.Duration
		r          float64
		want       time.Duration
	}{
		{1, 0, 0.5, 50 * time.Millisecond},
		{2, 0, 0.5, 100 * time.Millisecond},
		{3, 0, 0.999999, 399999600},
		{8, 0, 0.5, 5 * time.Second},
		{200, 0, 0.5, 5 * time.Second}, // capped, no overflow
		{1, 0, 0, 0},
		{1, 2 * time.Second, 0.1, 2 * time.Second}, // Retry-After is a floor
		{1, time.Hour, 0.1, maxB},                  // clamped to the maximum
	}
	for _, tt := range tests {
		got := backoff(tt.n, minB, maxB, tt.retryAfter, tt.r)
		require.Equal(t, tt.want, got, "backoff(%d, ra %s, r %v) = %s, want %s", tt.n, tt.retryAfter, tt.r, got, tt.want)
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := newSettings(Config{MaxAttempts: 3, MaxAge: time.Hour, MinBackoff: time.Second, MaxBackoff: time.Minute})
	require.NoError(t, err)
	s.now, s.random = func() time.Time { return now }, func() float64 { return 0.5 }
	win := record{Since: now}

	reason, wait := s.decide(result{verdict: retry}, 1, win)
	require.Equal(t, Reason(""), reason)
	require.Equal(t, 500*time.Millisecond, wait)
	reason, _ = s.decide(result{verdict: retry}, 3, win)
	require.Equal(t, ReasonAttempts, reason)
	reason, _ = s.decide(result{verdict: retry}, 1, record{Since: now.Add(-time.Hour + 100*time.Millisecond)})
	require.Equal(t, ReasonAge, reason, "the next delivery would start past MaxAge")
	reason, _ = s.decide(result{verdict: refused}, 1, win)
	require.Equal(t, ReasonRefused, reason)
	reason, _ = s.decide(result{verdict: delivered}, 3, win)
	require.Equal(t, Reason(""), reason)

	require.Equal(t, ReasonAttempts, s.overdue(4, win))
	require.Equal(t, ReasonAge, s.overdue(1, record{Since: now.Add(-time.Hour)}))
	require.Equal(t, Reason(""), s.overdue(3, win))
}

// A delivery its client refused (breaker open) is a failed delivery:
// counted, with the backoff of its attempt (it was a snooze of about a
// second, not counted, issue 26); and since a dead destination's messages
// wait for their turns at its pace, it also parks the message once the
// window, from its enqueue, is as old as MaxAttempts failed deliveries
// make it at most: 1 s + 2 s here.
func TestDecideLocalRefusal(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := newSettings(Config{MaxAttempts: 3, MinBackoff: time.Second, MaxBackoff: time.Minute})
	require.NoError(t, err)
	s.now, s.random = func() time.Time { return now }, func() float64 { return 0.5 }
	require.Equal(t, 3*time.Second, s.span)
	refusal := result{verdict: localRefusal}
	for n, want := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second} {
		reason, wait := s.decide(refusal, n, record{Since: now})
		require.Equal(t, Reason(""), reason, "refusal %d", n)
		require.Equal(t, want, wait, "decide(refusal %d) = %s, want %s", n, wait, want)
	}
	reason, _ := s.decide(refusal, 3, record{Since: now})
	require.Equal(t, ReasonAttempts, reason, "the third delivery, refused")
	reason, _ = s.decide(refusal, 1, record{Since: now.Add(-3 * time.Second)})
	require.Equal(t, ReasonAttempts, reason, "the first, refused 3 s after the enqueue: the time MaxAttempts implies")
	reason, _ = s.decide(refusal, 1, record{Since: now.Add(-2999 * time.Millisecond)})
	require.Equal(t, Reason(""), reason, "refused before that time")
	reason, _ = s.decide(result{verdict: retry}, 2, record{Since: now.Add(-3 * time.Second)})
	require.Equal(t, Reason(""), reason, "a delivery that was sent is counted, not timed")
}

// Once a delivery may have reached the downstream, the message is parked
// rather than delivered again past the downstream's key retention.
func TestDecideKeyRetention(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := newSettings(Config{KeyRetention: time.Hour, MaxAge: 10 * time.Hour, MinBackoff: time.Minute, MaxBackoff: time.Minute})
	require.NoError(t, err)
	s.now, s.random = func() time.Time { return now }, func() float64 { return 0.5 }
	reason, _ := s.decide(result{verdict: retry}, 1, record{Since: now, First: now.Add(-59*time.Minute - 45*time.Second)})
	require.Equal(t, ReasonRetention, reason, "the next delivery, in 30 s, would come an hour after the first")
	reason, _ = s.decide(result{verdict: retry}, 1, record{Since: now, First: now.Add(-50 * time.Minute)})
	require.Equal(t, Reason(""), reason)
	require.Equal(t, ReasonRetention, s.overdue(1, record{Since: now, First: now.Add(-time.Hour)}))
	require.Equal(t, Reason(""), s.overdue(1, record{Since: now.Add(-2 * time.Hour)}), "nothing reached it")

	w := record{}.tried(result{verdict: localRefusal}, now)
	require.True(t, w.First.IsZero(), "a refused delivery reached nothing")
	w = w.tried(result{verdict: retry, acted: true}, now.Add(time.Second))
	require.Equal(t, now.Add(time.Second), w.First)
	w = w.tried(result{verdict: retry, acted: true}, now.Add(2*time.Second))
	require.Equal(t, now.Add(time.Second), w.First, "the first that may have taken effect")
}

func TestSpan(t *testing.T) {
	for _, tt := range []struct {
		attempts   int
		minB, maxB time.Duration
		want       time.Duration
	}{
		{1, time.Second, time.Minute, 0},
		{2, time.Second, time.Minute, time.Second},
		{6, time.Second, 8 * time.Second, 23 * time.Second},
		{25, time.Second, 5 * time.Minute, 511*time.Second + 15*5*time.Minute},
		{1000, time.Hour, 24 * time.Hour, 31*time.Hour + 994*24*time.Hour}, // capped, no overflow
	} {
		got := span(tt.attempts, tt.minB, tt.maxB)
		require.Equal(t, tt.want, got, "span(%d, %s, %s) = %s, want %s", tt.attempts, tt.minB, tt.maxB, got, tt.want)
	}
}

func TestRescueAfterMustExceedTimeout(t *testing.T) {
	_, err := newSettings(Config{Timeout: 5 * time.Second, RescueAfter: 6 * time.Second})
	require.ErrorContains(t, err, "RescueAfter")
	_, err = newSettings(Config{Timeout: 5 * time.Second, RescueAfter: 7 * time.Second})
	require.NoError(t, err)
}
