package server

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
)

//go:embed schema.sql
var schemaSQL string

// migrateLock is the advisory lock that serialises concurrent [Migrate] calls
// (two nodes starting at once).
const migrateLock = 0x6964656d5f6d6967 // "idem_mig"

// Schema returns the SQL that [Migrate] applies, for applications that run
// their migrations with a tool of their own. It creates the idem_records
// table and its expiry index in the current schema, if they are missing,
// and converts the table of an earlier version (see Migrate).
func Schema() string { return schemaSQL }

// Migrate creates the table of [PostgresStore] in the first schema of the
// search_path, if it is missing, and converts in place a table made by an
// earlier version (headers kept as jsonb), whose records keep replaying.
// It is idempotent and safe to call from several processes at once; ctx
// governs it. *pgxpool.Pool and *pgx.Conn satisfy db.
func Migrate(ctx context.Context, db interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}) error {
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schemaSQL)
		return err
	})
	if err != nil {
		return fmt.Errorf("server: migrate: %w", err)
	}
	return nil
}
