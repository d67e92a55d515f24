package mysqlidem

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// schemaSQL creates the idem_records table of [Store] in the database of
// the connection. Times are DATETIME(6) in UTC (the store writes
// UTC_TIMESTAMP(6), whatever the session's time_zone). The scope's names
// are VARBINARY, kept byte for byte as the middleware gave them.
const schemaSQL = `CREATE TABLE IF NOT EXISTS idem_records (
    scope_hash     BINARY(32)      NOT NULL,
    tenant         VARBINARY(1024) NOT NULL,
    principal      VARBINARY(1024) NOT NULL,
    route          VARBINARY(1024) NOT NULL,
    idem_key       VARBINARY(1024) NOT NULL,
    fp_alg         VARCHAR(32)     NOT NULL,
    fingerprint    VARBINARY(64)   NOT NULL,
    state          VARCHAR(16)     NOT NULL,
    token          BINARY(16)      NOT NULL,
    attempt        INT             NOT NULL,
    writes         BIGINT UNSIGNED NOT NULL DEFAULT 0,
    locked_until   DATETIME(6)     NULL,
    recovery_point BLOB            NULL,
    recovery_data  MEDIUMBLOB      NULL,
    status         INT             NULL,
    response       LONGBLOB        NULL,
    created_at     DATETIME(6)     NOT NULL,
    expires_at     DATETIME(6)     NOT NULL,
    request        LONGBLOB        NULL,
    reconcile_at   DATETIME(6)     NULL,
    resolved_by    BLOB            NULL,
    resolved_at    DATETIME(6)     NULL,
    resolve_reason BLOB            NULL,
    PRIMARY KEY (scope_hash),
    KEY idem_records_expires_at (expires_at),
    KEY idem_records_running (state, locked_until)
) ENGINE=InnoDB`

// Schema returns the SQL that [Migrate] applies, for applications that run
// their migrations with a tool of their own: one CREATE TABLE IF NOT
// EXISTS of the idem_records table with its indexes. A table made by an
// older version lacks the resolution's columns, which such a tool must
// add (Migrate does: ALTER TABLE idem_records ADD COLUMN resolved_by BLOB
// NULL, ADD COLUMN resolved_at DATETIME(6) NULL, ADD COLUMN
// resolve_reason BLOB NULL).
//
// The columns: scope_hash, the SHA-256 of (tenant, principal, route, key),
// with those four in clear for people reading the table; the request's
// fingerprint and its algorithm; state (running, done, unavailable,
// uncertain, not-applied); the fencing token of the current attempt and
// the attempt number; writes, which every fenced write adds one to, so that its affected-rows count
// says whether the token matched whatever the connection's
// CLIENT_FOUND_ROWS setting; the lease's end (locked_until) and the last
// recovery point (Leased mode); the status, and the response in the
// stored form of every store (server.Response's MarshalBinary); the
// request (Leased mode, for a reconciler) and when a reconciler looks at
// the operation next; who resolved an uncertain operation, when and why
// (resolved_by, resolved_at, resolve_reason).
func Schema() string { return schemaSQL }

// migrateLock is the named lock (GET_LOCK) that serialises concurrent
// [Migrate] calls of one database.
const migrateLock = "idem_migrate"

// Migrate creates the table of [Store] in db's current database, if it is
// missing, and adds to a table of an older version the columns it lacks
// (the resolution's: one ALTER TABLE, which MySQL 8 and MariaDB 10.4+ apply
// instantly). It is idempotent and safe to call from several processes at
// once (a named lock serialises them, on a connection of its own); on a
// table that is up to date it changes nothing and takes no table lock that
// a request waits for. ctx governs it.
func Migrate(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysqlidem: migrate: %w", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", migrateLock).Scan(&got); err != nil {
		return fmt.Errorf("mysqlidem: migrate: %w", err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("mysqlidem: migrate: another node held the lock %q for 60 s", migrateLock)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", migrateLock) //nolint:errcheck // the session's end releases it too
	if _, err := conn.ExecContext(ctx, schemaSQL); err != nil {
		return fmt.Errorf("mysqlidem: migrate: %w", err)
	}
	return wrap("migrate", addColumns(ctx, conn))
}

// addedColumns are the columns added since the first version of the
// table, with their definitions, in the order they are added.
var addedColumns = []struct{ name, def string }{
	{"resolved_by", "BLOB NULL"},
	{"resolved_at", "DATETIME(6) NULL"},
	{"resolve_reason", "BLOB NULL"},
}

// addColumns adds to the table the addedColumns it lacks, in one ALTER
// TABLE, and runs none when it has them all. MySQL has no ADD COLUMN IF
// NOT EXISTS: it reads information_schema, under Migrate's named lock.
func addColumns(ctx context.Context, conn *sql.Conn) error {
	var alter []string
	for _, c := range addedColumns {
		var n int
		err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'idem_records' AND column_name = ?`, c.name).Scan(&n)
		if err != nil {
			return err
		}
		if n == 0 {
			alter = append(alter, "ADD COLUMN "+c.name+" "+c.def)
		}
	}
	if len(alter) == 0 {
		return nil
	}
	_, err := conn.ExecContext(ctx, "ALTER TABLE idem_records "+strings.Join(alter, ", "))
	return err
}
