package outbox

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// legacyOpts are the River options of a message's job before the relay
// and Config.Queues: one queue for every destination.
var legacyOpts = river.InsertOpts{Queue: queueName, MaxAttempts: riverMaxAttempts,
	UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: allStates}}

// Migrate upgrades an outbox made before the relay in place: the messages
// already in River's table (jobs without a message ID in their arguments,
// as Enqueue stored them then, in the one queue "idem_outbox") keep their
// job IDs as their IDs, are delivered, parked and re-driven by them, and
// the new messages' IDs never equal theirs.
func TestMigrateUpgradesAnOutboxInPlace(t *testing.T) {
	ctx := context.Background()
	pool := migratedPool(t)
	_, err := pool.Exec(ctx, "DROP TABLE idem_outbox_enqueued") // the schema of the version before
	require.NoError(t, err)
	o, err := New(pool, fastConfig(&events{}))
	require.NoError(t, err)
	tg := target{name: "postgres", run: o.Run, parked: o.Parked}
	d := newDownstream(t, func(key string, n int) (int, http.Header, string) {
		if key == "k-old-refused" && n == 1 {
			return http.StatusBadRequest, nil, "no"
		}
		return http.StatusCreated, nil, "ok"
	})
	old := map[string]int64{}
	for _, key := range []string{"k-old", "k-old-refused"} { // as the Enqueue before the relay stored them
		m := d.message("event")
		m.Key = key
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			res, err := o.client.InsertTx(ctx, tx, toArgs(&m), &legacyOpts)
			if err == nil {
				old[key] = res.Job.ID
			}
			return err
		}))
	}

	require.NoError(t, Migrate(ctx, pool))
	st, err := o.Lookup(ctx, old["k-old"])
	require.NoError(t, err)
	assert.Equal(t, StatePending, st.State)
	assert.Equal(t, "k-old", st.Message.Key)
	assert.Equal(t, old["k-old"], st.ID)
	m := d.message("event")
	m.Key = "k-new"
	newID, err := enqueueIn(t, o, m)
	require.NoError(t, err)
	assert.Greater(t, newID, old["k-old-refused"], "drawn from the jobs' sequence")
	m.Key = "k-old"
	_, err = enqueueIn(t, o, m) // enqueued again: folded into the old one by the relay
	require.NoError(t, err)

	running(t, tg.run)
	p := tg.waitParked(t, 1, "the old refused message is parked")[0]
	assert.Equal(t, old["k-old-refused"], p.ID)
	require.NoError(t, o.Redrive(ctx, p.ID))
	eventually(t, func() bool {
		return d.requests("k-old") == 1 && d.requests("k-new") == 1 && d.requests("k-old-refused") == 2
	}, "old and new messages delivered, the re-driven one again")
	eventually(t, func() bool {
		st, err = o.Lookup(ctx, old["k-old"])
		return err == nil && st.State == StateDelivered
	}, "the old message is delivered")
	enqueued, _ := counts(t, pool)
	require.Zero(t, enqueued)
	res, err := o.client.JobList(ctx, byKey("k-old"))
	require.NoError(t, err)
	assert.Len(t, res.Jobs, 1, "the old message's key is still taken by it")
}

// Migrate bounds the pending list of each of River's GIN indexes (see
// ginPendingLimit), and bounds it again when the bound was taken off.
func TestMigrateBoundsTheGINPendingLists(t *testing.T) {
	ctx := context.Background()
	pool := migratedPool(t)
	bounded := func() (n int) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE i.indrelid = 'river_job'::regclass AND a.amname = 'gin'
AND c.reloptions @> ARRAY['gin_pending_list_limit=128']`).Scan(&n))
		return n
	}
	assert.Equal(t, 2, bounded(), "river_job_args_index and river_job_metadata_index")

	_, err := pool.Exec(ctx, "ALTER INDEX river_job_args_index RESET (gin_pending_list_limit)")
	require.NoError(t, err)
	require.Equal(t, 1, bounded())
	require.NoError(t, Migrate(ctx, pool))
	assert.Equal(t, 2, bounded())
}

// Migrate waits at most boundLockTimeout for an index's lock to bound its
// pending list: while a transaction holds the index, Migrate fails with an
// error that names the bound, and changes nothing of it; once the
// transaction ends, Migrate bounds it.
func TestMigrateGivesUpOnABusyGINIndex(t *testing.T) {
	ctx := context.Background()
	pool := migratedPool(t)
	_, err := pool.Exec(ctx, "ALTER INDEX river_job_args_index RESET (gin_pending_list_limit)")
	require.NoError(t, err)
	long, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = long.Rollback(ctx) }()
	_, err = long.Exec(ctx, "SELECT count(*) FROM river_job WHERE args @> '{}'") // holds its indexes
	require.NoError(t, err)

	limit := func() (kB string) { // "" when not set
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce((SELECT option_value FROM pg_options_to_table(reloptions)
WHERE option_name = 'gin_pending_list_limit'), '') FROM pg_class WHERE oid = 'river_job_args_index'::regclass`).Scan(&kB))
		return kB
	}

	err = Migrate(ctx, pool)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pending lists of River's GIN indexes")
	assert.Empty(t, limit(), "nothing changed")

	require.NoError(t, long.Rollback(ctx))
	require.NoError(t, Migrate(ctx, pool))
	assert.Equal(t, "128", limit())
}
