package mysqlidem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem/internal/localclaim"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// Store keeps idempotency records in the idem_records table that [Migrate]
// creates, on MySQL 8 or MariaDB 10.6+ (InnoDB), through a *sql.DB on
// github.com/go-sql-driver/mysql. It serves both modes: a [server.Transactional]
// handler gets the claim's transaction as a *sql.Tx from [server.SQLTx]; a
// [server.Leased] claim commits before the handler runs. Two stores on two
// *sql.DB over one database (two nodes) share the records. It judges
// leases and retention by the database's clock (UTC_TIMESTAMP(6)).
//
// Each Transactional claim holds a connection of db until it commits, and
// each duplicate waiting for it one more: bound db with SetMaxOpenConns and
// size it for them. The DSN's interpolateParams=true halves the round trips
// of every statement with arguments (the driver otherwise prepares each).
// It is safe for concurrent use.
type Store struct {
	db    *sql.DB
	local localclaim.Set

	flavourOnce sync.Once
	mariaDB     bool // MariaDB: SET STATEMENT bounds a statement's lock wait

	// offset is added to the database clock; tests move time with it. Nil
	// means zero.
	offset func() time.Duration
	// now is the local clock of the wait bound; nil means time.Now.
	now func() time.Time

	traceMu   sync.Mutex
	traceName string // the database's name, for traces (traceDB)
}

// New returns a store on db, which must use go-sql-driver/mysql and hold
// the table of [Migrate].
func New(db *sql.DB) *Store { return &Store{db: db} }

// CheckMode accepts both modes.
func (s *Store) CheckMode(server.Mode) error { return nil }

// Claim claims c's key: in a transaction that the handler shares
// ([server.Transactional]), or in statements that commit on their own
// ([server.Leased]).
func (s *Store) Claim(ctx context.Context, c *server.Claim) (server.ClaimResult, error) {
	if trace.On() { // learn the database's name before holding a connection
		s.traceDB()
	}
	if c.Mode == server.Leased {
		return s.claimLeased(ctx, c)
	}
	res, err := s.claimTx(ctx, c)
	if errors.Is(err, errLockWait) || errors.Is(err, errPoolBusy) && s.local.Has(c.Scope) {
		return server.ClaimResult{Verdict: server.VerdictInFlight, Waited: true}, nil
	}
	return res, err
}

func (s *Store) clock() int64 {
	if s.offset == nil {
		return 0
	}
	return s.offset().Microseconds()
}

func (s *Store) timeNow() time.Time {
	if s.now == nil {
		return time.Now()
	}
	return s.now()
}

// isMariaDB reports whether the server is MariaDB, asked once.
func (s *Store) isMariaDB(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) bool {
	s.flavourOnce.Do(func() {
		var v string
		if err := q.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err == nil {
			s.mariaDB = strings.Contains(v, "MariaDB")
		}
	})
	return s.mariaDB
}

// micros is d as the microseconds of an INTERVAL.
func micros(d time.Duration) int64 { return d.Microseconds() }

// Sweep deletes at most limit records whose retention has passed and whose
// lease is not live, oldest first, in a READ COMMITTED transaction that
// skips the rows a request holds (SKIP LOCKED) and takes no gap locks.
func (s *Store) Sweep(ctx context.Context, limit int) (int, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, fmt.Errorf("mysqlidem: sweep: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	off, start := s.clock(), trace.Begin()
	scopes, err := collectScopes(tx.QueryContext(ctx, sqlSweepPick, off, off, limit))
	if err != nil || len(scopes) == 0 {
		return 0, wrap("sweep", err)
	}
	q := "DELETE FROM idem_records WHERE scope_hash IN (" + placeholders(len(scopes)) + ")"
	r, err := tx.ExecContext(ctx, q, scopes...)
	if err != nil {
		return 0, wrap("sweep", err)
	}
	n, _ := r.RowsAffected()
	err = tx.Commit()
	if trace.On() { // the picked rows are locked: the DELETE deletes them all
		s.traceGone(trace.Sweep, scopes, start, err)
	}
	return int(n), wrap("sweep", err)
}

// collectScopes reads a column of scope hashes.
func collectScopes(rows *sql.Rows, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var scopes []any
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		scopes = append(scopes, b)
	}
	return scopes, rows.Err()
}

// placeholders is n comma-separated question marks.
func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

// wrap prefixes a non-nil err with the package and the operation.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("mysqlidem: %s: %w", op, err)
}

// Stats counts the running records (see [server.StoreStats]) in one plain
// read, which waits for no lock. A Transactional claim is an open
// transaction, invisible until it commits done: only Leased operations
// count.
func (s *Store) Stats(ctx context.Context) (server.StoreStats, error) {
	var st server.StoreStats
	var oldest int64
	if err := s.db.QueryRowContext(ctx, sqlStats, s.clock()).Scan(&st.Running, &oldest); err != nil {
		return server.StoreStats{}, wrap("stats", err)
	}
	st.OldestRunning = max(time.Duration(oldest)*time.Microsecond, 0)
	return st, nil
}
