package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// migrateLock is the advisory lock that serialises concurrent Migrate calls.
const migrateLock = 0x69646d5f6f757462 // "idm_outb"

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
	return nil
}
