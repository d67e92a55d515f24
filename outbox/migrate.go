package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// migrateLock is the advisory lock that serialises concurrent Migrate calls.
const migrateLock = 0x69646d5f6f757462 // "idm_outb"

// River's table of jobs has GIN indexes (on a job's arguments and its
// metadata), and every version of a job row (inserted by the relay, taken
// by a fetch, finished by a completion) adds an entry per JSON key and
// value to each. PostgreSQL gathers such entries in a pending list, and
// the statement that finds the list over gin_pending_list_limit (4 MB by
// default) moves the whole list into the index before it ends (PostgreSQL,
// "GIN Fast Update Technique"). With a message's arguments, that list
// fills every few seconds at 500 messages/s, and the statement that empties
// it, a relay's insert or a fetch, took 60 to 140 ms: every message behind
// it waited as long (BENCHMARKS.md §8). Migrate bounds the pending lists
// of River's GIN indexes at ginPendingLimit (kB), so that each statement
// that empties one moves little; it keeps fast update on: turned off, every
// version of a row went into the indexes one entry at a time, and the
// tail was longer than with the bound (§8 again).
const ginPendingLimit = 128

// boundLockTimeout is how long Migrate waits for the lock of one of
// River's GIN indexes to bound its pending list (see boundPendingLists).
const boundLockTimeout = time.Second

// sqlUnboundedGIN lists the GIN indexes of River's table of jobs (in the
// first schema of the search_path) whose pending list is not bounded at
// %[1]d kB; sqlBoundGIN bounds one (%s, the index) at %d kB.
const (
	sqlUnboundedGIN = `SELECT c.oid::regclass::text FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE i.indrelid = 'river_job'::regclass AND a.amname = 'gin'
AND NOT coalesce(c.reloptions @> ARRAY['gin_pending_list_limit=%[1]d'], false)`
	sqlBoundGIN = `ALTER INDEX %s SET (gin_pending_list_limit = %d)`
)

// Migrate creates (or brings up to date) the outbox's tables in the first
// schema of the search_path: River's, then the outbox's own table of
// messages enqueued and not yet relayed, idem_outbox_enqueued (see the
// package doc, "The queue"). It upgrades an outbox made by an earlier
// version in place: messages already in River's table keep their IDs and
// are delivered as before. Run it before deploying this version: a
// message this version enqueues waits in the new table until a dispatcher
// of this version relays it. It is idempotent and safe to call from several
// processes at once; ctx governs it. *[pgxpool.Pool] and *[pgx.Conn]
// satisfy db. An [Outbox] with [Config.Schema] needs its tables in that
// schema: run Migrate on a connection whose search_path starts with it.
//
// Migrate also bounds the pending lists of the GIN indexes of River's job
// table at 128 kB (see the package doc, "The queue"). The first time, on
// each index, this takes a lock that River's statements on the table wait
// for, briefly; if a transaction holds the index for over a second (a
// long transaction that wrote River's table), Migrate returns an error
// saying so and changes nothing of the bound: run it again.
func Migrate(ctx context.Context, db interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}) error {
	m, err := rivermigrate.New(riverpgxv5.New(nil), &rivermigrate.Config{Logger: discardLogger()})
	if err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	// One transaction per step: a River migration may use what the one
	// before it added (an enum value), which Postgres allows only after a
	// commit.
	for {
		applied := 0
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
				return err
			}
			// MigrateTx is deprecated because several steps in one
			// transaction can fail; one step per transaction cannot, and
			// keeps the lock that orders concurrent callers.
			//lint:ignore SA1019 one step per transaction is what the deprecation asks for
			res, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{MaxSteps: 1})
			if err == nil {
				applied = len(res.Versions)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("outbox: migrate: %w", err)
		}
		if applied == 0 {
			break
		}
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sqlCreateEnqueued)
		return err
	})
	if err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
			return err
		}
		return boundPendingLists(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("outbox: migrate: bounding the pending lists of River's GIN indexes (run Migrate again): %w", err)
	}
	return nil
}

// boundPendingLists bounds the pending list of each of River's GIN
// indexes at ginPendingLimit (see above), in tx. The change locks the
// index ACCESS EXCLUSIVE: River's inserts, fetches and completions wait
// for it, and it waits for every transaction that used the index. So it
// waits at most boundLockTimeout (then tx fails, and nothing is changed),
// and only for an index not yet bounded: once per index.
func boundPendingLists(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", boundLockTimeout.Milliseconds())); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, fmt.Sprintf(sqlUnboundedGIN, ginPendingLimit))
	if err != nil {
		return err
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, ix := range indexes {
		if _, err := tx.Exec(ctx, fmt.Sprintf(sqlBoundGIN, ix, ginPendingLimit)); err != nil {
			return err
		}
	}
	return nil
}
