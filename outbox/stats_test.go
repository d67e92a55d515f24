package outbox

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
)

// Stats counts the messages pending and parked, and the age of the oldest
// pending one; delivered messages are not counted.
func TestStatsCountsPendingAndParked(t *testing.T) {
	for _, name := range []string{"memory", "postgres"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cfg := fastConfig(&events{})
			var tg target
			var stats func(context.Context) (Stats, error)
			var age func() // makes the oldest message a minute old
			if name == "memory" {
				var q *Memory
				tg, q = memoryTarget(cfg)
				stats = q.Stats
				age = func() { q.mu.Lock(); q.s.now = func() time.Time { return time.Now().Add(time.Minute) }; q.mu.Unlock() }
			} else {
				var o *Outbox
				tg, o, _ = postgresTarget(t, cfg)
				stats = o.Stats
				age = func() {
					_, err := o.pool.Exec(ctx, `UPDATE idem_outbox_enqueued SET enqueued_at = now() - interval '1 minute'
						WHERE id = (SELECT min(id) FROM idem_outbox_enqueued)`)
					require.NoError(t, err)
				}
			}
			st, err := stats(ctx)
			require.NoError(t, err)
			assert.Equal(t, Stats{}, st, "an empty outbox")

			d := newDownstream(t, func(key string, _ int) (int, http.Header, string) {
				if key == "refused" {
					return http.StatusBadRequest, nil, "no"
				}
				return http.StatusCreated, nil, "ok"
			})
			for _, key := range []string{"refused", "a", "b"} {
				m := d.message("event")
				m.Key = key
				_, err := tg.enqueue(ctx, m)
				require.NoError(t, err)
			}
			age()
			st, err = stats(ctx)
			require.NoError(t, err)
			assert.Equal(t, 3, st.Pending)
			assert.Zero(t, st.Parked)
			assert.GreaterOrEqual(t, st.OldestPending, time.Minute)
			assert.Less(t, st.OldestPending, 2*time.Minute)

			running(t, tg.run)
			eventually(t, func() bool {
				st, err := stats(ctx)
				return err == nil && st == Stats{Parked: 1}
			}, "two delivered, one parked, none pending")
		})
	}
}

// With Config.Schema, Stats and Parked name River's table and state type
// in that schema, not in the connection's search_path: a message enqueued
// in schema A is counted, and listed once parked, by an outbox whose
// pool's search_path is another schema, without River's tables.
func TestStatsInASchema(t *testing.T) {
	pool := migratedPool(t)
	ctx := context.Background()
	var schema string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema))
	home, err := New(pool, Config{Logger: discardLogger()})
	require.NoError(t, err)
	var id int64
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
		id, err = home.Enqueue(ctx, tx, Message{Name: "event", Method: "POST", URL: "http://127.0.0.1:9/x", Key: "k-schema", Body: []byte("{}")})
		return err
	}))

	elsewhere := pgtest.NewPool(t, pgtest.SchemaURL(t)) // an empty schema on its search_path
	o, err := New(elsewhere, Config{Schema: schema, Logger: discardLogger()})
	require.NoError(t, err)
	st, err := o.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Pending)

	_, _, err = home.relayOnce(ctx)
	require.NoError(t, err)
	_, err = home.client.JobCancel(ctx, jobOf(t, home, id)) // parked, as a cancelled job
	require.NoError(t, err)
	parked, err := o.Parked(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	require.Equal(t, "k-schema", parked[0].Message.Key)
}
