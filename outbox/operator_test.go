package outbox

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// looker is the lookup of a target's outbox.
type looker interface {
	Lookup(ctx context.Context, id int64) (MessageStatus, error)
	LookupKey(ctx context.Context, key string) (MessageStatus, error)
}

func TestLookupTellsWhereAMessageStands(t *testing.T) {
	for _, name := range []string{"memory", "postgres"} {
		t.Run(name, func(t *testing.T) {
			cfg := fastConfig(&events{})
			var tg target
			var lk looker
			before := StateEnqueued // waiting for the relay
			if name == "memory" {
				var q *Memory
				tg, q = memoryTarget(cfg)
				lk, before = q, StatePending
			} else {
				var o *Outbox
				tg, o, _ = postgresTarget(t, cfg)
				lk = o
			}
			d := newDownstream(t, func(key string, _ int) (int, http.Header, string) {
				if key == "k-refused" {
					return http.StatusBadRequest, http.Header{"Content-Type": {"text/plain"}}, "no such event"
				}
				return http.StatusOK, nil, "ok"
			})
			ctx := context.Background()
			refused, delivered := d.message("payment.refused"), d.message("payment.created")
			refused.Key, delivered.Key = "k-refused", "k-delivered"
			refusedID, err := tg.enqueue(ctx, refused)
			require.NoError(t, err)
			deliveredID, err := tg.enqueue(ctx, delivered)
			require.NoError(t, err)

			st, err := lk.Lookup(ctx, refusedID)
			require.NoError(t, err)
			assert.Equal(t, before, st.State, "not delivered before the dispatcher runs")
			assert.Equal(t, "k-refused", st.Message.Key)
			assert.Equal(t, refusedID, st.ID)
			assert.WithinDuration(t, time.Now(), st.EnqueuedAt, time.Minute)
			st, err = lk.LookupKey(ctx, "k-delivered")
			require.NoError(t, err)
			assert.Equal(t, before, st.State)
			assert.Equal(t, deliveredID, st.ID)
			assert.Equal(t, delivered.Body, st.Message.Body)

			running(t, tg.run)
			tg.waitParked(t, 1, "the refused message is parked")
			st, err = lk.LookupKey(ctx, "k-refused")
			require.NoError(t, err)
			assert.Equal(t, StateParked, st.State)
			assert.Equal(t, refusedID, st.ID)
			assert.Equal(t, ReasonRefused, st.Reason)
			assert.Equal(t, http.StatusBadRequest, st.Status)
			assert.Equal(t, "no such event", string(st.Body))
			assert.Equal(t, 1, st.Attempts)

			eventually(t, func() bool {
				st, err = lk.Lookup(ctx, deliveredID)
				return err == nil && st.State == StateDelivered
			}, "the other one is delivered")
			assert.Empty(t, st.Reason, "a delivered message has no park reason")
			assert.True(t, st.ParkedAt.IsZero())
			assert.Equal(t, http.StatusOK, st.Status)

			_, err = lk.Lookup(ctx, 1<<40)
			assert.ErrorIs(t, err, ErrUnknownMessage)
			_, err = lk.LookupKey(ctx, "k-never")
			assert.ErrorIs(t, err, ErrUnknownMessage)
		})
	}
}

// River UI's "retry" of a parked message (River's JobRetryTx) does what
// Redrive does: a new retry window, and no delivery once the downstream
// may have forgotten the key. Before the dispatcher applied Redrive's rule
// to such a message it was parked again at once (its old window had used
// its MaxAttempts), with no delivery and no word of why.
func TestRiverRetryOfAParkedMessageIsARedrive(t *testing.T) {
	cfg := fastConfig(&events{})
	cfg.MaxAttempts, cfg.KeyRetention = 2, testRetention
	clock := &offsetClock{}
	tg, o, _ := postgresTarget(t, cfg)
	o.s.now = clock.now
	d := newDownstream(t, func(string, int) (int, http.Header, string) { return http.StatusServiceUnavailable, nil, "down" })
	ctx := context.Background()
	m := d.message("payment.created")
	m.Key = "k-ui-retry"
	id, err := tg.enqueue(ctx, m)
	require.NoError(t, err)
	running(t, tg.run)
	p := tg.waitParked(t, 1, "parked after MaxAttempts 503s")[0]
	require.Equal(t, ReasonAttempts, p.Reason)
	require.Equal(t, 2, d.requests("k-ui-retry"))
	require.Equal(t, id, p.ID, "the message's ID, not its job's")
	job := jobOf(t, o, id)

	_, err = o.client.JobRetry(ctx, job) // what River UI's retry button runs
	require.NoError(t, err)
	eventually(t, func() bool { return d.requests("k-ui-retry") == 4 }, "a new window: MaxAttempts more deliveries")
	again := tg.waitParked(t, 1, "parked again")[0]
	assert.Equal(t, ReasonAttempts, again.Reason)
	assert.Equal(t, 2, again.Attempts, "the attempts of the new window")

	clock.advance(testRetention * 3 / 2) // past the downstream's key retention
	require.ErrorIs(t, o.Redrive(ctx, id), ErrPastRetention)
	_, err = o.client.JobRetry(ctx, job)
	require.NoError(t, err)
	eventually(t, func() bool {
		st, err := o.Lookup(ctx, id)
		return err == nil && st.State == StateParked && st.Reason == ReasonRetention
	}, "parked again for the key's retention, as Redrive refuses it")
	assert.Equal(t, 4, d.requests("k-ui-retry"), "nothing sent past the key's retention")
}
