package mysqlidem

import (
	"context"
	"database/sql"
	"fmt"
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
    PRIMARY KEY (scope_hash),
    KEY idem_records_expires_at (expires_at),
    KEY idem_records_running (state, locked_until)
) ENGINE=InnoDB`

// Schema returns the SQL that [Migrate] applies, for applications that run
// their migrations with a tool of their own: one CREATE TABLE IF NOT
// EXISTS of the idem_records table with its indexes.
//
// The columns: scope_hash, the SHA-256 of (tenant, principal, route, key),
// with those four in clear for people reading the table; the request's
// fingerprint and its algorithm; state (running, done, unavailable); the
// fencing token of the current attempt and the attempt number; writes,
// which every fenced write adds one to, so that its affected-rows count
// says whether the token matched whatever the connection's
// CLIENT_FOUND_ROWS setting; the lease's end (locked_until) and the last
// recovery point (Leased mode); the status, and the response in the
// stored form of every store (server.Response's MarshalBinary); the
// request (Leased mode, for a reconciler) and when a reconciler looks at
// the operation next.
func Schema() string { return schemaSQL }

// migrateLock is the named lock (GET_LOCK) that serialises concurrent
// [Migrate] calls of one database.
const migrateLock = "idem_migrate"

// Migrate creates the table of [Store] in db's current database, if it is
// missing. It is idempotent and safe to call from several processes at
// once (a named lock serialises them, on a connection of its own); on a
// table that exists it changes nothing and takes no table lock that a
// request waits for. ctx governs it.
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
	return nil
}
