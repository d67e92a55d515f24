package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idem/internal/localclaim"
)

// PostgresSQLStore keeps idempotency records on Postgres through
// database/sql, for services whose code reaches the database through a
// *sql.DB (directly, or under GORM, sqlx, bun, ent or sqlc): its
// [Transactional] handlers get the claim's transaction as a *sql.Tx, from
// [SQLTx]. The *sql.DB must use pgx's stdlib driver
// (github.com/jackc/pgx/v5/stdlib: sql.Open("pgx", url), stdlib.OpenDB or
// stdlib.OpenDBFromPool); lib/pq is not supported, nor a driver wrapped by
// another (tracing wrappers), because the claim runs PostgresStore's own
// statements on the pgx connection under the *sql.Conn (its Raw), pipelined
// as PostgresStore pipelines them.
//
// It keeps PostgresStore's records, in the same idem_records table (run
// [Migrate] on a pgx pool, or [Schema] through db), with PostgresStore's
// claim rules and guarantees: the scope's advisory lock held until the
// transaction ends, the record written once as it commits, a 5xx, a
// rejection status or a panic rolling back, commit-failed (503 with
// Retry-After when the connection was lost). A handler that ends the
// transaction itself is caught as [TxAttempt] says: through the *sql.Tx
// (Commit, Rollback: database/sql then answers sql.ErrTxDone), or with SQL
// (COMMIT, ROLLBACK, "COMMIT; BEGIN"), seen from the connection's
// transaction status and the claim's transaction-local mark, as with
// [Tx]; but the handler's statements after a COMMIT of its own run in
// autocommit until it returns (a *sql.Tx cannot refuse them), and a
// "COMMIT; BEGIN" followed by a 5xx is rolled back unseen, its first part
// committed. A claim costs two round trips (database/sql's BEGIN, then the lock
// and the read) and the commit two (the record, then database/sql's
// COMMIT), where PostgresStore needs one each.
//
// It serves [Transactional] routes only: CheckMode refuses [Leased] ones,
// which a PostgresStore on a pgx pool of the same database serves, over
// the same records (so does its reconciler: TakeAbandoned takes nothing
// here). Two stores on two *sql.DB (two nodes) share the records. Each
// claim holds a connection of db, and each duplicate waiting for it one
// more, so bound db with SetMaxOpenConns and size it for them too. It is
// safe for concurrent use.
type PostgresSQLStore struct {
	db    *sql.DB
	pg    *PostgresStore // the claim's rules and statements, and the test clock; no pool
	local localclaim.Set
}

// NewPostgresSQLStore returns a store on db, which must use pgx's stdlib
// driver and hold the schema of [Migrate].
func NewPostgresSQLStore(db *sql.DB) *PostgresSQLStore {
	return &PostgresSQLStore{db: db, pg: &PostgresStore{}}
}

// pgxStdlib is the package of pgx's database/sql driver.
const pgxStdlib = "github.com/jackc/pgx/v5/stdlib"

// errNotPgx is the error of a claim whose connection is not pgx's.
var errNotPgx = errors.New("server: PostgresSQLStore needs a *sql.DB on pgx's stdlib driver (" + pgxStdlib + ")")

// CheckMode accepts [Transactional] routes when db's driver is pgx's, and
// refuses [Leased] ones.
func (s *PostgresSQLStore) CheckMode(mode Mode) error {
	if mode == Leased {
		return errors.New("server: PostgresSQLStore serves Transactional routes only; serve Leased routes with a PostgresStore on a pgx pool of the same database")
	}
	if t := reflect.TypeOf(s.db.Driver()); t == nil || t.Kind() != reflect.Pointer || t.Elem().PkgPath() != pgxStdlib {
		return fmt.Errorf("%w, not %T", errNotPgx, s.db.Driver())
	}
	return nil
}

// Claim claims c's key in a transaction that the handler shares, as
// [PostgresStore] does.
func (s *PostgresSQLStore) Claim(ctx context.Context, c *Claim) (ClaimResult, error) {
	if c.Mode == Leased {
		return ClaimResult{}, s.CheckMode(Leased)
	}
	res, err := s.claimTx(ctx, c)
	pgErr := (*pgconn.PgError)(nil)
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" || errors.Is(err, errPoolBusy) && s.local.Has(c.Scope) {
		res = inFlight(0)
		res.Waited = true
		return res, nil
	}
	return res, err
}

// conn takes a connection of db, waiting at most wait when it is positive
// (the request's context bounds the wait too): errPoolBusy past it.
func (s *PostgresSQLStore) conn(ctx context.Context, wait time.Duration) (*sql.Conn, error) {
	if wait <= 0 {
		return s.db.Conn(ctx)
	}
	bounded, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := s.db.Conn(bounded)
	if err != nil && ctx.Err() == nil && bounded.Err() != nil {
		return nil, fmt.Errorf("%w: %w", errPoolBusy, err)
	}
	return conn, err
}

// pgxConn is what pgx's stdlib connection (*stdlib.Conn) offers beyond
// database/sql's driver interfaces: the *pgx.Conn under it.
type pgxConn interface{ Conn() *pgx.Conn }

// raw runs f on the *pgx.Conn under conn, which it must not keep.
func raw(conn *sql.Conn, f func(pc *pgx.Conn) error) error {
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(pgxConn)
		if !ok {
			return fmt.Errorf("%w, not %T", errNotPgx, dc)
		}
		return f(pc.Conn())
	})
}

// Sweep deletes at most limit records whose retention has passed, oldest
// first, in PostgresStore's statement, which skips records a request holds.
func (s *PostgresSQLStore) Sweep(ctx context.Context, limit int) (int, error) {
	r, err := s.db.ExecContext(ctx, sqlSweep, limit, s.pg.offset())
	if err != nil {
		return 0, fmt.Errorf("server: sweep: %w", err)
	}
	n, err := r.RowsAffected()
	return int(n), err
}

// Stats counts the running records (see [StoreStats]) in PostgresStore's
// statement. ctx governs it.
func (s *PostgresSQLStore) Stats(ctx context.Context) (StoreStats, error) {
	var st StoreStats
	var oldest float64
	if err := s.db.QueryRowContext(ctx, sqlStats, s.pg.offset()).Scan(&st.Running, &oldest); err != nil {
		return StoreStats{}, fmt.Errorf("server: stats: %w", err)
	}
	st.OldestRunning = max(time.Duration(oldest*float64(time.Second)), 0)
	return st, nil
}

// TakeAbandoned takes nothing: the store serves no [Leased] route. Run the
// reconciler of Leased routes on the PostgresStore that serves them.
func (s *PostgresSQLStore) TakeAbandoned(context.Context, []string, time.Duration, int) ([]*Taken, error) {
	return nil, nil
}
