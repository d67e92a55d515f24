package outbox

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
					_, err := o.pool.Exec(ctx, `UPDATE river_job SET created_at = now() - interval '1 minute'
						WHERE id = (SELECT min(id) FROM river_job)`)
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

// With Config.Schema, Stats names River's table and state type in that
// schema.
func TestStatsInASchema(t *testing.T) {
	pool := migratedPool(t)
	ctx := context.Background()
	var schema string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema))
	o, err := New(pool, Config{Schema: schema, Logger: discardLogger()})
	require.NoError(t, err)
	st, err := o.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{}, st)
}
