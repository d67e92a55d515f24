package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
)

// enqueueIn enqueues m through o in a transaction of its own, committed.
func enqueueIn(t *testing.T, o *Outbox, m Message) (int64, error) {
	t.Helper()
	var id int64
	err := pgx.BeginFunc(context.Background(), o.pool, func(tx pgx.Tx) (err error) {
		id, err = o.Enqueue(context.Background(), tx, m)
		return err
	})
	return id, err
}

// counts returns the messages waiting to be relayed and River's jobs.
func counts(t *testing.T, pool *pgxpool.Pool) (enqueued, jobs int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT (SELECT count(*) FROM idem_outbox_enqueued), (SELECT count(*) FROM river_job)").Scan(&enqueued, &jobs))
	return enqueued, jobs
}

// holdRelays makes every transaction that deletes rows of the
// search_path's table of enqueued messages (a relay's) wait at its commit,
// after all its statements, for the advisory lock key, held by the
// returned transaction until it ends: a deferred trigger takes the lock.
func holdRelays(t *testing.T, pool *pgxpool.Pool, key int) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	for _, sql := range []string{
		fmt.Sprintf(`CREATE FUNCTION hold_relay() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_advisory_xact_lock(%d); RETURN NULL; END $$`, key),
		`CREATE CONSTRAINT TRIGGER hold_relay AFTER DELETE ON idem_outbox_enqueued
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hold_relay()`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	blocker, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = blocker.Rollback(ctx) }) // a failed test lets the relay go
	_, err = blocker.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", key)
	require.NoError(t, err)
	return blocker
}

// sqlRelayHeld finds a relay's backend held at its commit by holdRelays
// (the lock $1), and tells whether it wrote River's job table in that
// transaction.
const sqlRelayHeld = `SELECT l.pid, EXISTS (SELECT FROM pg_locks r
    WHERE r.pid = l.pid AND r.relation = 'river_job'::regclass AND r.mode = 'RowExclusiveLock' AND r.granted)
FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objid = $1 AND NOT l.granted`

// A relay that dies at its commit, after it deleted its rows and inserted
// their jobs into River's table, commits nothing: its rows stay, no job is
// left, and the next relay moves each message once, carrying its ID. The
// relay is held at its commit (holdRelays), and its connection is then
// terminated, as a killed process's is.
func TestRelayDyingBeforeItsCommitLeavesTheRows(t *testing.T) {
	pool := migratedPool(t)
	o, err := New(pool, Config{Logger: discardLogger(), StopTimeout: time.Minute})
	require.NoError(t, err)
	ctx := context.Background()
	ids := map[string]int64{}
	for _, key := range []string{"k-1", "k-2", "k-3"} {
		id, err := enqueueIn(t, o, Message{Name: "event", Method: "POST", URL: "http://127.0.0.1:9/x", Key: key})
		require.NoError(t, err)
		ids[key] = id
	}

	const lock = 0x6f627231 // "obr1"
	blocker := holdRelays(t, pool, lock)
	failed := make(chan error, 1)
	go func() { _, _, err := o.relayOnce(ctx); failed <- err }()
	var pid int
	var inserted bool
	eventually(t, func() bool {
		return pool.QueryRow(ctx, sqlRelayHeld, lock).Scan(&pid, &inserted) == nil
	}, "the relay deleted the rows, inserted the jobs, and waits at its commit")
	require.True(t, inserted, "the relay wrote River's table")
	_, err = pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	require.Error(t, <-failed)
	require.NoError(t, blocker.Rollback(ctx))
	eventually(t, func() bool {
		var alive bool
		err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&alive)
		return err == nil && !alive
	}, "the relay's backend is gone, and its locks with it")

	enqueued, jobs := counts(t, pool)
	require.Equal(t, 3, enqueued, "the rows stay")
	require.Zero(t, jobs, "no job is left")

	before := time.Now()
	moved, insertedAt, err := o.relayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, moved)
	assert.False(t, insertedAt.Before(before), "the insert's time, which paces the next pass")
	enqueued, jobs = counts(t, pool)
	require.Equal(t, [2]int{0, 3}, [2]int{enqueued, jobs})
	for key, id := range ids {
		st, err := o.LookupKey(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, StatePending, st.State)
		assert.Equal(t, id, st.ID, "key %s keeps the ID Enqueue returned", key)
	}
}

// A row whose message does not decode (one that Enqueue did not write)
// stays in the table, and the rows beside it are moved.
func TestRelayLeavesAnUndecodableRow(t *testing.T) {
	pool := migratedPool(t)
	o, err := New(pool, Config{Logger: discardLogger()})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = enqueueIn(t, o, Message{Name: "event", Method: "POST", URL: "http://127.0.0.1:9/x", Key: "k-good"})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO idem_outbox_enqueued (key, id, message) VALUES ('k-bad', 7, '{"header": 1}')`)
	require.NoError(t, err)

	moved, _, err := o.relayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, moved)
	var key string
	var id int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT key, id FROM idem_outbox_enqueued").Scan(&key, &id))
	assert.Equal(t, "k-bad", key)
	assert.Equal(t, int64(7), id)
	_, jobs := counts(t, pool)
	assert.Equal(t, 1, jobs)
}

// Enqueue is idempotent by key: while the first message waits to be
// relayed, the same message returns the first one's ID and adds nothing,
// and a different one is refused with ErrKeyConflict (two messages of one
// operation under one name included); once the first was relayed, the
// relay settles it: the same message is folded into the first (one job,
// sent once), a different one is parked with ReasonKeyConflict, unsent,
// until Redrive sends it.
func TestEnqueueIdempotentByKeyAcrossTheRelay(t *testing.T) {
	tg, o, pool := postgresTarget(t, fastConfig(&events{}))
	d := newDownstream(t, nil)
	ctx := context.Background()
	m := d.message("payment.created")
	m.Key = "k-same"
	other := m
	other.Body = []byte(`{"event":"other"}`)
	first, err := enqueueIn(t, o, m)
	require.NoError(t, err)
	again, err := enqueueIn(t, o, m)
	require.NoError(t, err)
	assert.Equal(t, first, again, "the first one's ID")
	_, err = enqueueIn(t, o, other)
	assert.ErrorIs(t, err, ErrKeyConflict)
	errRolledBack := errors.New("rolled back")
	require.ErrorIs(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { // two of one operation under one name
		if _, err := o.Enqueue(ctx, tx, Message{Name: "twice", Method: "POST", URL: d.srv.URL, Key: "k-op"}); err != nil {
			return err
		}
		_, err := o.Enqueue(ctx, tx, Message{Name: "twice", Method: "POST", URL: d.srv.URL, Key: "k-op", Body: []byte("2")})
		assert.ErrorIs(t, err, ErrKeyConflict)
		return errRolledBack
	}), errRolledBack)
	moved, _, err := o.relayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, moved)

	_, err = enqueueIn(t, o, m)
	require.NoError(t, err)
	_, err = enqueueIn(t, o, other)
	assert.ErrorIs(t, err, ErrKeyConflict, "the same message waits in the table under the key")
	_, _, err = o.relayOnce(ctx)
	require.NoError(t, err)
	enqueued, jobs := counts(t, pool)
	require.Equal(t, [2]int{0, 1}, [2]int{enqueued, jobs}, "the same message is folded into the first")
	conflictID, err := enqueueIn(t, o, other)
	require.NoError(t, err, "the first message was relayed: the relay settles it")
	_, _, err = o.relayOnce(ctx)
	require.NoError(t, err)

	running(t, tg.run)
	parked := tg.waitParked(t, 1, "the different message is parked")[0]
	assert.Equal(t, conflictID, parked.ID)
	assert.Equal(t, ReasonKeyConflict, parked.Reason)
	assert.Equal(t, other.Body, parked.Message.Body)
	assert.Contains(t, parked.Err, "message "+strconv.FormatInt(first, 10))
	eventually(t, func() bool { return d.requests("k-same") == 1 }, "the first message is delivered")
	st, err := o.LookupKey(ctx, "k-same")
	require.NoError(t, err)
	assert.Equal(t, first, st.ID, "the key's first message")

	require.NoError(t, o.Redrive(ctx, conflictID))
	eventually(t, func() bool { return d.requests("k-same") == 2 }, "the re-driven conflict is sent, under its key")
	d.mu.Lock()
	defer d.mu.Unlock()
	assert.Equal(t, string(other.Body), d.got["k-same"][1])
}

// An enqueue that commits wakes a listening relay, and at most one
// enqueue per wakeEvery of an Outbox sends the notification.
func TestEnqueueWakesTheRelay(t *testing.T) {
	pool := migratedPool(t)
	o, err := New(pool, Config{Logger: discardLogger()})
	require.NoError(t, err)
	start, offset := time.Now(), atomic.Int64{} // a clock that moves only when told
	o.s.now = func() time.Time { return start.Add(time.Duration(offset.Load())) }
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { o.listen(ctx, wake); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case <-wake: // it listens, and pokes once for what was committed before
	case <-time.After(20 * time.Second):
		t.Fatal("the relay did not listen")
	}
	_, err = enqueueIn(t, o, Message{Name: "event", Method: "POST", URL: "http://127.0.0.1:9/x", Key: "k-wake"})
	require.NoError(t, err)
	select {
	case <-wake:
	case <-time.After(20 * time.Second):
		t.Fatal("the commit did not wake the relay")
	}
	offset.Add(int64(wakeEvery - time.Millisecond))
	assert.False(t, o.wakeDue(), "an enqueue within wakeEvery of the last notification sends none")
	offset.Add(int64(time.Millisecond))
	assert.True(t, o.wakeDue(), "one after it does")
}

// Parked lists by message ID, and pages by it, even when the relay gave
// the messages' jobs IDs in another order (it moves rows in key order).
func TestParkedPagesByMessageID(t *testing.T) {
	tg, o, _ := postgresTarget(t, fastConfig(&events{}))
	d := newDownstream(t, func(string, int) (int, http.Header, string) { return http.StatusBadRequest, nil, "no" })
	ctx := context.Background()
	var ids []int64
	for _, key := range []string{"k-z", "k-y", "k-x", "k-w"} { // enqueued in the reverse of the relay's order
		m := d.message("event")
		m.Key = key
		id, err := tg.enqueue(ctx, m)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	_, _, err := o.relayOnce(ctx)
	require.NoError(t, err)
	running(t, tg.run)
	tg.waitParked(t, 4, "all four parked")
	var got []int64
	for after := int64(0); ; {
		page, err := o.Parked(ctx, after, 3)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, p := range page {
			got = append(got, p.ID)
		}
		after = page[len(page)-1].ID
	}
	assert.Equal(t, ids, got)
}

// With Config.Schema, the message is enqueued in that schema's table,
// relayed and delivered by an outbox whose pool's search_path is another
// schema, without the outbox's tables.
func TestRelayInASchema(t *testing.T) {
	home := migratedPool(t)
	ctx := context.Background()
	var schema string
	require.NoError(t, home.QueryRow(ctx, "SELECT current_schema()").Scan(&schema))
	elsewhere := pgtest.NewPool(t, pgtest.SchemaURL(t))
	cfg := fastConfig(&events{})
	cfg.Schema, cfg.PollInterval = schema, time.Hour // woken by the commit, not by a poll
	o, err := New(elsewhere, cfg)
	require.NoError(t, err)
	d := newDownstream(t, nil)
	running(t, o.Run)
	eventually(t, func() bool { // the relay listens
		var n int
		err := home.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN "idem_outbox_%'`).Scan(&n)
		return err == nil && n > 0
	}, "the relay listens")
	m := d.message("event")
	m.Key = "k-schema"
	id, err := enqueueIn(t, o, m)
	require.NoError(t, err)
	eventually(t, func() bool { return d.requests("k-schema") == 1 }, "delivered")
	enqueued, jobs := counts(t, home)
	assert.Equal(t, [2]int{0, 1}, [2]int{enqueued, jobs})
	st, err := o.Lookup(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "k-schema", st.Message.Key)
}

// After a batch that moved rows, a relay passes again once FetchCooldown
// has passed since the batch's jobs were inserted; after an empty pass,
// every relayRecheck while on the watch, then every PollInterval, as after
// an error.
func TestRelayNextPass(t *testing.T) {
	s, err := newSettings(Config{FetchCooldown: 2 * time.Millisecond, PollInterval: time.Second})
	require.NoError(t, err)
	for _, tc := range []struct {
		moved                  int
		err                    error
		sinceInsert, sinceBusy time.Duration
		want                   time.Duration
	}{
		{moved: 3, sinceInsert: 500 * time.Microsecond, want: 1500 * time.Microsecond},
		{moved: 1000, sinceInsert: 30 * time.Millisecond, want: 0},
		{moved: 0, sinceBusy: 20 * time.Millisecond, want: relayRecheck},
		{moved: 0, sinceBusy: watch, want: time.Second},
		{moved: 0, err: errors.New("connection refused"), want: time.Second},
	} {
		got := s.nextPass(tc.moved, tc.err, tc.sinceInsert, tc.sinceBusy)
		assert.Equal(t, tc.want, got, "moved %d, err %v, inserted %s ago, %s since busy", tc.moved, tc.err, tc.sinceInsert, tc.sinceBusy)
	}
}

// A wake does not cut short the pace after a batch; it ends any other wait.
func TestRelayPacedBy(t *testing.T) {
	wake := make(chan struct{}, 1)
	assert.Nil(t, pacedBy(3, wake), "after a batch")
	assert.Equal(t, (<-chan struct{})(wake), pacedBy(0, wake), "after an empty pass")
}
