package outbox

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRolledBackNeverSentCommittedDelivered(t *testing.T) {
	ev := &events{}
	tg, o, pool := postgresTarget(t, fastConfig(ev))
	d := newDownstream(t, nil)
	ctx := context.Background()

	rolledBack := d.message("rolled.back")
	rolledBack.Key = "rolled-back"
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = o.Enqueue(ctx, tx, rolledBack)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))

	committed := d.message("committed")
	committed.Key = "committed"
	_, err = tg.enqueue(ctx, committed)
	require.NoError(t, err)
	require.Equal(t, 1, messageCount(t, pool), "the rolled-back message left a row")

	running(t, tg.run)
	eventually(t, func() bool {
		delivered, _, _ := ev.counts() // told after the response arrived
		return delivered == 1
	}, "the committed message is delivered")
	require.Equal(t, 1, d.requests("committed"))
	require.Equal(t, 0, d.requests("rolled-back"))
}

// Twenty messages, each answered 503, then 429 with Retry-After 0, then
// 201: each is delivered once, on its third request. The client's breaker
// is off: the first requests' 503s opened it, and each half-open probe
// that met another first request opened it for 5 s more, so the time to
// deliver hung on the order of the deliveries and ran past 20 s on a busy
// machine.
func TestDeliveredOnceEachAndRetried(t *testing.T) {
	config := func() Config {
		cfg := fastConfig(&events{})
		cfg.Client.Breaker.Disabled = true
		return cfg
	}
	eachTarget(t, config, func(t *testing.T, tg target) {
		// Each key fails twice (503, then 429 with Retry-After 0), then 201.
		d := newDownstream(t, func(_ string, n int) (int, http.Header, string) {
			switch n {
			case 1:
				return http.StatusServiceUnavailable, nil, "busy"
			case 2:
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"0"}}, "slow down"
			}
			return http.StatusCreated, nil, "ok"
		})
		ctx := context.Background()
		const n = 20
		for i := range n {
			m := d.message("event")
			m.Key = "key-" + string(rune('a'+i))
			_, err := tg.enqueue(ctx, m)
			require.NoError(t, err)
		}
		running(t, tg.run)
		eventually(t, func() bool { return len(d.keys()) == n && allAt(d, 3) }, "every message delivered on its third request")
		for _, k := range d.keys() {
			require.Equal(t, 3, d.requests(k), "key %s", k)
		}
	})
}

func allAt(d *downstream, n int) bool {
	for _, k := range d.keys() {
		if d.requests(k) < n {
			return false
		}
	}
	return true
}

func TestRefusedIsParkedThenRedriven(t *testing.T) {
	eachTarget(t, func() Config { return fastConfig(&events{}) }, func(t *testing.T, tg target) {
		accept := make(chan struct{})
		d := newDownstream(t, func(_ string, _ int) (int, http.Header, string) {
			select {
			case <-accept:
				return http.StatusOK, nil, "ok"
			default:
				return http.StatusBadRequest, http.Header{"X-Reason": {"unknown account"}}, `{"error":"unknown account"}`
			}
		})
		ctx := context.Background()
		m := d.message("payment.created")
		m.Key = "refused-key"
		id, err := tg.enqueue(ctx, m)
		require.NoError(t, err)
		running(t, tg.run)

		p := tg.waitParked(t, 1, "the refused message is parked")[0]
		require.Equal(t, id, p.ID)
		require.Equal(t, ReasonRefused, p.Reason)
		require.Equal(t, http.StatusBadRequest, p.Status)
		require.Equal(t, "unknown account", p.Header.Get("X-Reason"))
		require.Equal(t, `{"error":"unknown account"}`, string(p.Body))
		require.Equal(t, 1, p.Attempts)
		require.Equal(t, "refused-key", p.Message.Key)
		require.Equal(t, m.Body, p.Message.Body)
		require.Equal(t, 1, d.requests("refused-key"), "a refusal is not retried")

		close(accept)
		require.NoError(t, tg.redrive(ctx, id))
		eventually(t, func() bool { return d.requests("refused-key") == 2 }, "the re-driven message is delivered with its key")
		tg.waitParked(t, 0, "it is no longer parked")
		require.ErrorIs(t, tg.redrive(ctx, id), ErrNotParked)
		require.ErrorIs(t, tg.redrive(ctx, id+1000), ErrNotParked)
	})
}

func TestParkedAfterMaxAttempts(t *testing.T) {
	eachTarget(t, func() Config {
		cfg := fastConfig(&events{})
		cfg.MaxAttempts = 3
		return cfg
	}, func(t *testing.T, tg target) {
		d := newDownstream(t, func(string, int) (int, http.Header, string) {
			return http.StatusServiceUnavailable, nil, "down"
		})
		ctx := context.Background()
		m := d.message("payment.created")
		m.Key = "always-503"
		_, err := tg.enqueue(ctx, m)
		require.NoError(t, err)
		running(t, tg.run)
		parked := tg.waitParked(t, 1, "parked after 3 deliveries")
		require.Equal(t, ReasonAttempts, parked[0].Reason)
		require.Equal(t, 3, parked[0].Attempts)
		require.Equal(t, http.StatusServiceUnavailable, parked[0].Status)
		require.Equal(t, 3, d.requests("always-503"))
	})
}

func TestEnqueueIsIdempotentByKey(t *testing.T) {
	eachTarget(t, func() Config { return fastConfig(&events{}) }, func(t *testing.T, tg target) {
		d := newDownstream(t, nil)
		ctx := context.Background()
		m := d.message("payment.created")
		m.Key = "same-key"
		first, err := tg.enqueue(ctx, m)
		require.NoError(t, err)
		again, err := tg.enqueue(ctx, m)
		require.NoError(t, err)
		require.Equal(t, first, again, "the same message under its key is one message")

		other := m
		other.Body = []byte(`{"event":"other"}`)
		_, err = tg.enqueue(ctx, other)
		require.ErrorIs(t, err, ErrKeyConflict)

		running(t, tg.run)
		eventually(t, func() bool { return d.requests("same-key") == 1 }, "delivered")
	})
}

func TestBadInputStoresNothing(t *testing.T) {
	ev := &events{}
	_, o, pool := postgresTarget(t, fastConfig(ev))
	ctx := context.Background()
	_, err := o.Enqueue(ctx, nil, validMessage())
	require.ErrorIs(t, err, ErrNoTx)

	bad := []func(m *Message){
		func(m *Message) { m.Method = "" },
		func(m *Message) { m.URL = "not a url" },
		func(m *Message) { m.Body = make([]byte, maxBodyBytes+1) },
		func(m *Message) { m.Header.Set("Idempotency-Key", "x") },
		func(m *Message) { m.Header.Set("X-Big", strings.Repeat("v", 20<<20)) },
		func(m *Message) { m.Header = headers(100_000, 0) },
		func(m *Message) { m.Header = emptyHeaders(100_000) },
	}
	for _, edit := range bad {
		m := validMessage()
		edit(&m)
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := o.Enqueue(ctx, tx, m)
			require.ErrorIs(t, err, ErrInvalidMessage)
			return nil // commit: the error must have stored nothing
		})
		require.NoError(t, err)
	}
	require.Equal(t, 0, messageCount(t, pool))
	require.False(t, errors.Is(ErrInvalidMessage, ErrNoTx))
}

// With the idem client's key header named otherwise (Config.Client.KeyHeader),
// every delivery carries the message's key under that name, and a message
// may not set that header itself.
func TestClientKeyHeader(t *testing.T) {
	cfg := func() Config {
		c := fastConfig(&events{})
		c.Client.KeyHeader = "X-Request-Key"
		return c
	}
	eachTarget(t, cfg, func(t *testing.T, tg target) {
		d := newDownstream(t, func(_ string, n int) (int, http.Header, string) {
			if n == 1 {
				return http.StatusServiceUnavailable, nil, "busy"
			}
			return http.StatusCreated, nil, "ok"
		})
		d.keyHeader = "X-Request-Key"
		ctx := context.Background()
		bad := d.message("event")
		bad.Header.Set("x-request-key", "mine")
		_, err := tg.enqueue(ctx, bad)
		require.ErrorIs(t, err, ErrInvalidMessage)
		m := d.message("event")
		m.Key = "k-custom"
		_, err = tg.enqueue(ctx, m)
		require.NoError(t, err)
		running(t, tg.run)
		eventually(t, func() bool { return d.requests("k-custom") == 2 }, "delivered on the second request, the key under X-Request-Key both times")
		assert.Equal(t, []string{"k-custom"}, d.keys(), "no request without the key")
	})
}
