//go:build unix

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/gobuild"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/testserver"
)

// relayLock is the advisory lock that sqlHoldRelays's trigger takes.
const relayLock = 0x6f627232 // "obr2"

// sqlHoldRelays makes every insert into the search_path's River job
// table (a relay's, which has deleted its rows before it) wait for
// relayLock once its rows are in, before it returns to the relay, which
// has not sent its COMMIT yet: a trigger takes the lock.
var sqlHoldRelays = []string{
	fmt.Sprintf(`CREATE FUNCTION hold_relay() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_advisory_xact_lock(%d); RETURN NULL; END $$`, relayLock),
	`CREATE TRIGGER hold_relay AFTER INSERT ON river_job FOR EACH STATEMENT EXECUTE FUNCTION hold_relay()`,
}

// sqlRelayHeld finds a relay's backend held by sqlHoldRelays ($1 is
// relayLock), and tells whether it deleted rows of the table of enqueued
// messages in that transaction.
const sqlRelayHeld = `SELECT l.pid, EXISTS (SELECT FROM pg_locks r
    WHERE r.pid = l.pid AND r.relation = 'idem_outbox_enqueued'::regclass AND r.mode = 'RowExclusiveLock' AND r.granted)
FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objid = $1 AND NOT l.granted`

// TestOutboxRelayKilled: 300 notifications are committed in the outbox
// (rows of the table of enqueued messages), and a dispatcher process
// starts. Its relay deletes the rows, inserts them as River jobs, and is
// held before its commit by a lock the test holds (sqlHoldRelays); the
// process is SIGKILLed there. The relay's transaction dies with it: the
// rows stay, and no job is left. A new dispatcher then delivers every
// notification, and the Receiver's records show each exactly once.
func TestOutboxRelayKilled(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dispatcher")
	require.NoError(t, gobuild.BuildIn(filepath.Join("..", "examples", "payments", "dispatcher"), ".", bin))
	const n = 300
	rig := newOutboxRig(t, pgtest.SchemaURL(t), testserver.Config{}, api.ReceiverConfig{})
	ob, err := outbox.New(rig.pool, outbox.Config{RescueAfter: rescueAfter, Timeout: 3 * time.Second})
	require.NoError(t, err)
	ids := rig.enqueue(t, ob, 0, n)
	log, err := os.Create(filepath.Join(t.TempDir(), "dispatchers.log"))
	require.NoError(t, err)
	defer log.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, sql := range sqlHoldRelays {
		_, err = rig.pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	blocker, err := rig.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(context.Background()) }()
	_, err = blocker.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", relayLock)
	require.NoError(t, err)
	victim := startDispatcher(t, bin, rig.url, "a", log)
	var pid int
	var deleted bool
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) { // polling the database, not testing time
		err := rig.pool.QueryRow(ctx, sqlRelayHeld, relayLock).Scan(&pid, &deleted)
		if err == nil {
			break
		}
		require.Less(t, time.Since(start), time.Minute, "the relay did not insert its jobs; log:\n%s", tail(log))
	}
	require.True(t, deleted, "the relay deleted its rows before it inserted the jobs")
	victim.kill(t)
	require.NoError(t, blocker.Rollback(ctx))
	_, err = rig.pool.Exec(ctx, "DROP TRIGGER hold_relay ON river_job")
	require.NoError(t, err)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) { // the backend sees its client gone
		var alive bool
		require.NoError(t, rig.pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&alive))
		if !alive {
			break
		}
		require.Less(t, time.Since(start), time.Minute, "the killed relay's backend lives on")
	}
	var enqueued, jobs int
	require.NoError(t, rig.pool.QueryRow(ctx,
		"SELECT (SELECT count(*) FROM idem_outbox_enqueued), (SELECT count(*) FROM river_job)").Scan(&enqueued, &jobs))
	require.Equal(t, n, enqueued, "the killed relay's rows stay")
	require.Zero(t, jobs, "the killed relay left no job")

	startDispatcher(t, bin, rig.url, "b", log)
	rig.waitNotified(t, n, 60*time.Second)
	rig.requireExactlyOnce(t, ids)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		st, err := ob.Stats(ctx)
		require.NoError(t, err)
		if st.Pending == 0 {
			require.Zero(t, st.Parked, "parked messages")
			break
		}
		require.Less(t, time.Since(start), time.Minute, "messages still pending: %+v", st)
	}
}
