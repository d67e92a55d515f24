package outbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// offsetClock is a clock that a test moves forward without sleeping.
type offsetClock struct{ offset atomic.Int64 }

// testRetention is the downstreams' key retention of the re-drive tests:
// they move their clock past it or within it by half of it or more, so
// the real time that passes meanwhile (seconds, on a loaded machine) never
// decides on which side of it a message is.
const testRetention = time.Hour

func (c *offsetClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// forgetful is a downstream that acts on the first request of a key and
// drops its response (the connection is closed), then answers 503.
type forgetful struct {
	srv     *httptest.Server
	mu      sync.Mutex
	effects map[string]int
	seen    map[string]int
}

func newForgetful(t *testing.T) *forgetful {
	f := &forgetful{effects: map[string]int{}, seen: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		f.mu.Lock()
		f.seen[key]++
		first := f.seen[key] == 1
		if first {
			f.effects[key]++
		}
		f.mu.Unlock()
		if !first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close() // acted; the response is lost
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *forgetful) count(key string) (effects, requests int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.effects[key], f.seen[key]
}

// A message whose first delivery acted downstream, then was parked, is
// not re-driven once the downstream may have forgotten its key (issue 28
// defect 3: Redrive returned nil and the operation ran again), unless the
// caller forces it.
func TestRedrivePastKeyRetentionIsRefused(t *testing.T) {
	config := func() Config {
		cfg := fastConfig(&events{})
		cfg.MaxAttempts, cfg.KeyRetention = 2, testRetention
		return cfg
	}
	t.Run("memory", func(t *testing.T) {
		clock := &offsetClock{}
		tg, q := memoryTarget(config())
		q.s.now = clock.now
		redrivePastRetention(t, tg, clock)
	})
	t.Run("postgres", func(t *testing.T) {
		clock := &offsetClock{}
		tg, o, _ := postgresTarget(t, config())
		o.s.now = clock.now
		redrivePastRetention(t, tg, clock)
	})
}

func redrivePastRetention(t *testing.T, tg target, clock *offsetClock) {
	f := newForgetful(t)
	ctx := context.Background()
	id, err := tg.enqueue(ctx, Message{Name: "payment.created", Method: "POST", URL: f.srv.URL + "/hook", Key: "k-" + tg.name, Body: []byte("{}")})
	require.NoError(t, err)
	running(t, tg.run)
	tg.waitParked(t, 1, "parked after an ambiguous delivery and a 503")
	effects, requests := f.count("k-" + tg.name)
	require.Equal(t, 1, effects)
	require.Equal(t, 2, requests)
	p := tg.waitParked(t, 1, "")[0]
	require.False(t, p.FirstAttempt.IsZero(), "the first delivery reached the downstream")
	require.Equal(t, p.FirstAttempt.Add(testRetention), p.RedriveBy)

	clock.advance(testRetention * 3 / 2) // past the downstream's key retention
	err = tg.redrive(ctx, id)
	require.ErrorIs(t, err, ErrPastRetention, "the first delivery may have acted, and its key may be forgotten")
	require.Equal(t, 1, len(tg.waitParked(t, 1, "still parked: nothing is sent again")))

	require.NoError(t, tg.force(ctx, id), "the caller's choice")
	eventually(t, func() bool { _, n := f.count("k-" + tg.name); return n == 4 }, "sent again, twice (503)")
	again := tg.waitParked(t, 1, "parked again")[0]
	require.True(t, again.FirstAttempt.After(p.FirstAttempt), "the retention counted anew")
}

// A message whose deliveries never reached the downstream (its client
// refused them, or no connection was made) has no first attempt, and is
// re-driven whatever its age.
func TestRedriveOfAMessageThatReachedNothing(t *testing.T) {
	config := func() Config {
		cfg := fastConfig(&events{})
		cfg.MaxAttempts, cfg.KeyRetention = 2, time.Second
		return cfg
	}
	eachTarget(t, config, func(t *testing.T, tg target) {
		m := validMessage() // 127.0.0.1:9: connection refused
		m.Key = "k-nowhere"
		id, err := tg.enqueue(context.Background(), m)
		require.NoError(t, err)
		running(t, tg.run)
		p := tg.waitParked(t, 1, "parked after two refused connections")[0]
		require.True(t, p.FirstAttempt.IsZero())
		require.True(t, p.RedriveBy.IsZero())
		require.NoError(t, tg.redrive(context.Background(), id))
	})
}

// A re-drive keeps the time of the first delivery that may have acted:
// the key's retention runs from it across re-drives, so a message
// re-driven once in time is refused once the retention has passed since
// that first delivery, however recent its last re-drive (a re-drive that
// restarted the count would let the operation run twice).
func TestRedriveKeepsTheFirstAttempt(t *testing.T) {
	config := func() Config {
		cfg := fastConfig(&events{})
		cfg.MaxAttempts, cfg.KeyRetention = 2, testRetention
		return cfg
	}
	t.Run("memory", func(t *testing.T) {
		clock := &offsetClock{}
		tg, q := memoryTarget(config())
		q.s.now = clock.now
		redriveKeepsTheFirstAttempt(t, tg, clock)
	})
	t.Run("postgres", func(t *testing.T) {
		clock := &offsetClock{}
		tg, o, _ := postgresTarget(t, config())
		o.s.now = clock.now
		redriveKeepsTheFirstAttempt(t, tg, clock)
	})
}

func redriveKeepsTheFirstAttempt(t *testing.T, tg target, clock *offsetClock) {
	f := newForgetful(t)
	ctx := context.Background()
	key := "kept-" + tg.name
	id, err := tg.enqueue(ctx, Message{Name: "payment.created", Method: "POST", URL: f.srv.URL + "/hook", Key: key, Body: []byte("{}")})
	require.NoError(t, err)
	running(t, tg.run)
	first := tg.waitParked(t, 1, "parked after an ambiguous delivery and a 503")[0]
	require.False(t, first.FirstAttempt.IsZero())

	clock.advance(testRetention / 2) // within the key's retention
	require.NoError(t, tg.redrive(ctx, id))
	eventually(t, func() bool { _, n := f.count(key); return n == 4 }, "sent again, twice (503)")
	again := tg.waitParked(t, 1, "parked again")[0]
	require.Equal(t, ReasonAttempts, again.Reason)
	require.True(t, again.FirstAttempt.Equal(first.FirstAttempt), "first attempt %s, was %s: kept across the re-drive",
		again.FirstAttempt, first.FirstAttempt)
	require.Equal(t, first.RedriveBy, again.RedriveBy)

	clock.advance(testRetention * 3 / 4) // 1.25 retentions after the first delivery, 0.75 after the re-drive
	require.ErrorIs(t, tg.redrive(ctx, id), ErrPastRetention)
	effects, requests := f.count(key)
	require.Equal(t, 1, effects)
	require.Equal(t, 4, requests, "nothing sent after the refusal")
}
