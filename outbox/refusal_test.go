package outbox

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A message to a host whose breaker stays open is parked after
// MaxAttempts deliveries, the refused ones counted, or as soon as a
// refused one comes after the time they imply (35 ms here: the fetches
// of River can take longer than these backoffs); issue 26: a refusal was
// snoozed about a second and not counted, so the message was never parked
// before MaxAge. The one request that opened the breaker is the only one
// sent. The Timeout is long: a delivery that waited for the
// breaker would hold its worker that long, and the message would not be
// parked within the test's wait.
func TestRefusedByTheBreakerIsParkedAfterMaxAttempts(t *testing.T) {
	config := func() Config {
		cfg := fastConfig(&events{})
		cfg.MaxAttempts, cfg.Timeout, cfg.RescueAfter = 4, 30*time.Second, time.Minute
		cfg.Client.Breaker = idem.BreakerConfig{ConsecutiveFailures: 1, OpenTimeout: time.Hour}
		return cfg
	}
	eachTarget(t, config, func(t *testing.T, tg target) {
		d := newDownstream(t, func(string, int) (int, http.Header, string) {
			return http.StatusServiceUnavailable, nil, "down"
		})
		m := d.message("payment.created")
		m.Key = "dead-host"
		_, err := tg.enqueue(context.Background(), m)
		require.NoError(t, err)
		running(t, tg.run)
		p := tg.waitParked(t, 1, "parked after 4 deliveries, 3 of them refused by the open breaker")[0]
		require.Equal(t, ReasonAttempts, p.Reason)
		require.GreaterOrEqual(t, p.Attempts, 2)
		require.LessOrEqual(t, p.Attempts, 4)
		require.Equal(t, 1, d.requests("dead-host"), "only the request that opened the breaker")
		require.Contains(t, p.Err, "circuit open")
	})
}

// Messages refused while their host's breaker was open wait out their
// backoff (about an hour here), unless a delivery to that host succeeds
// again: then they are made due at once.
func TestRefusedMessagesAreReleasedWhenTheHostAnswers(t *testing.T) {
	opened := make(chan time.Time, 1)
	config := func() Config {
		cfg := fastConfig(&events{})
		cfg.MinBackoff, cfg.MaxBackoff = time.Hour, time.Hour
		cfg.Client.Breaker = idem.BreakerConfig{ConsecutiveFailures: 1, OpenTimeout: 200 * time.Millisecond, Probes: 1}
		cfg.Client.Observer.OnBreakerChange = func(_ string, _, to idem.BreakerState) {
			if to == idem.BreakerOpen {
				select {
				case opened <- time.Now():
				default:
				}
			}
		}
		return cfg
	}
	t.Run("memory", func(t *testing.T) {
		tg, q := memoryTarget(config())
		q.s.random = func() float64 { return 0.99 }
		releasedWhenTheHostAnswers(t, tg, opened)
	})
	t.Run("postgres", func(t *testing.T) {
		tg, o, _ := postgresTarget(t, config())
		o.s.random = func() float64 { return 0.99 }
		releasedWhenTheHostAnswers(t, tg, opened)
	})
}

func releasedWhenTheHostAnswers(t *testing.T, tg target, opened chan time.Time) {
	var first atomic.Bool
	d := newDownstream(t, func(string, int) (int, http.Header, string) {
		if first.CompareAndSwap(false, true) {
			return http.StatusServiceUnavailable, nil, "down" // opens the breaker
		}
		return http.StatusCreated, nil, "ok"
	})
	ctx := context.Background()
	enqueue := func(key string) {
		m := d.message("event")
		m.Key = key
		_, err := tg.enqueue(ctx, m)
		require.NoError(t, err)
	}
	running(t, tg.run)
	enqueue("opener")
	at := <-opened
	for i := range 5 {
		enqueue("held-" + strconv.Itoa(i))
	}
	eventually(t, func() bool { return time.Since(at) > 300*time.Millisecond }, "the breaker lets a probe through")
	enqueue("probe")
	eventually(t, func() bool { return d.requests("probe") == 1 }, "the probe is delivered")
	for i := range 5 {
		key := "held-" + strconv.Itoa(i)
		eventually(t, func() bool { return d.requests(key) == 1 }, key+" is released and delivered")
	}
}
