package mysqlidem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

var (
	_ server.RecordStore = (*Store)(nil)
	_ server.RefReader   = (*Store)(nil)
)

// epochMicros renders a DATETIME(6) column (in UTC) as microseconds since
// the Unix epoch, whatever the session's time_zone and the DSN's
// parseTime; NULL stays NULL.
func epochMicros(col string) string {
	return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + col + ")"
}

// operatorColumns are a server.Record's columns without payload, then the
// store's clock (one offset argument), the resolution's columns, then the
// stored response and the
// stored request when the payload arguments (the next two, both the same)
// are true.
var operatorColumns = `tenant, principal, route, idem_key, attempt, state, request IS NOT NULL, status, ` +
	epochMicros("created_at") + `, ` + epochMicros("expires_at") + `, ` + epochMicros("locked_until") + `, ` +
	epochMicros("reconcile_at") + `, recovery_point, recovery_data, fp_alg, ` + epochMicros(now) + `,
    resolved_by, ` + epochMicros("resolved_at") + `, resolve_reason, CASE WHEN ? THEN response END, CASE WHEN ? THEN request END`

// scanRecord reads operatorColumns.
func scanRecord(row interface{ Scan(...any) error }) (server.Record, error) {
	var (
		rec                            server.Record
		tenant, principal, route, key  []byte
		leased                         bool
		status                         sql.NullInt64
		created, expires, lease, recon sql.NullInt64
		point, data, stored, request   []byte
		readAt                         int64
		by, why                        []byte
		resolvedAt                     sql.NullInt64
	)
	err := row.Scan(&tenant, &principal, &route, &key, &rec.Attempt, &rec.State, &leased, &status,
		&created, &expires, &lease, &recon, &point, &data, &rec.FingerprintAlg, &readAt,
		&by, &resolvedAt, &why, &stored, &request)
	if err != nil {
		return server.Record{}, err
	}
	if by != nil && resolvedAt.Valid && why != nil {
		rec.Resolved = &server.Resolved{By: string(by), Reason: string(why), At: utcMicros(resolvedAt.Int64),
			Applied: rec.State == "done"}
	}
	rec.Tenant, rec.Principal, rec.Route, rec.Key = string(tenant), string(principal), string(route), string(key)
	rec.Mode = server.Transactional
	if leased {
		rec.Mode = server.Leased
	}
	rec.Status = int(status.Int64)
	rec.CreatedAt, rec.ExpiresAt, rec.ReadAt = utcMicros(created.Int64), utcMicros(expires.Int64), utcMicros(readAt)
	if lease.Valid && rec.State == "running" {
		rec.LeaseEnds = utcMicros(lease.Int64)
	}
	if recon.Valid {
		rec.ReconcileAt = utcMicros(recon.Int64)
	}
	if point != nil {
		rec.Recovery = &server.Recovery{Point: string(point), Data: data}
	}
	if len(stored) > 0 {
		var res server.Response
		if err := res.UnmarshalBinary(stored); err != nil {
			return server.Record{}, err
		}
		rec.Header, rec.Body = res.Header, res.Body
	}
	if len(request) > 0 {
		r, err := server.ParseStoredRequest(request)
		if err != nil {
			return server.Record{}, err
		}
		rec.Request = r
	}
	return rec, nil
}

func utcMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// ReadRecord returns the record of op's scope (see [server.RecordStore])
// in one primary-key lookup, a plain read that waits for no lock. With
// payload it returns the stored response's headers and body, and a Leased
// record's stored request.
func (s *Store) ReadRecord(ctx context.Context, op server.Operation, payload bool) (server.Record, error) {
	rec, err := s.readScope(ctx, fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key), payload)
	if errors.Is(err, sql.ErrNoRows) {
		return server.Record{}, fmt.Errorf("%w (%s)", server.ErrUnknownKey, describe(op))
	}
	return rec, err
}

// ReadRef returns the record whose scope hash is scope, an operation's
// reference (see [server.RefReader]), in the same primary-key lookup as
// ReadRecord.
func (s *Store) ReadRef(ctx context.Context, scope [32]byte, payload bool) (server.Record, error) {
	rec, err := s.readScope(ctx, scope, payload)
	if errors.Is(err, sql.ErrNoRows) {
		return server.Record{}, fmt.Errorf("%w (operation reference %x)", server.ErrUnknownKey, scope[:])
	}
	return rec, err
}

// readScope reads the record of scope; the error wraps sql.ErrNoRows when
// there is none.
func (s *Store) readScope(ctx context.Context, scope [32]byte, payload bool) (server.Record, error) {
	q := `SELECT ` + operatorColumns + ` FROM idem_records WHERE scope_hash = ?`
	rec, err := scanRecord(s.db.QueryRowContext(ctx, q, s.clock(), payload, payload, scope[:]))
	return rec, wrap("read record", err)
}

// ListRunning returns a page of running and uncertain records (see
// [server.RecordStore]; an uncertain one is never stuck), oldest first,
// through the index on state. Only Leased records are seen: a
// Transactional claim is an open transaction, which commits its record
// done.
func (s *Store) ListRunning(ctx context.Context, q server.InFlightQuery) ([]server.Record, error) {
	after := q.After
	created := int64(-1 << 62)
	if !after.CreatedAt.IsZero() {
		created = after.CreatedAt.UnixMicro()
	}
	off := s.clock()
	query := `SELECT ` + operatorColumns + ` FROM idem_records
WHERE state IN ('running', 'uncertain') AND (? = 0 OR locked_until <= ` + now + `) AND (? = '' OR route = ?)
    AND (` + epochMicros("created_at") + `, tenant, principal, route, idem_key) > (?, ?, ?, ?, ?)
ORDER BY created_at, tenant, principal, route, idem_key LIMIT ?`
	recs, err := s.queryRecords(ctx, query, off, false, false, q.Stuck, off, q.Route, q.Route,
		created, after.Tenant, after.Principal, after.Route, after.Key, q.Limit)
	return recs, wrap("list running records", err)
}

// FindKey returns at most limit records whose key is key, in every scope
// (see [server.RecordStore]), oldest first, without payload. No index has
// the key first: it reads the table, as an operator's rare lookup may.
func (s *Store) FindKey(ctx context.Context, key string, limit int) ([]server.Record, error) {
	query := `SELECT ` + operatorColumns + ` FROM idem_records WHERE idem_key = ?
ORDER BY created_at, tenant, principal, route LIMIT ?`
	recs, err := s.queryRecords(ctx, query, s.clock(), false, false, key, limit)
	return recs, wrap("find key", err)
}

// queryRecords runs query, whose columns are operatorColumns, and reads
// its rows.
func (s *Store) queryRecords(ctx context.Context, query string, args ...any) ([]server.Record, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []server.Record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, rows.Err()
}

// evictWait bounds an eviction's wait for a request that holds the
// record's row, in seconds (MariaDB's FOR UPDATE WAIT; MySQL, which has no
// WAIT n, does not wait: NOWAIT).
const evictWait = 2

// MySQL's error of a locking read with NOWAIT that found the row locked.
const erLockNowait = 3572

// DeleteRecord deletes the record of op's scope (see [server.RecordStore])
// in a transaction that locks the row, judges its lease and deletes it,
// waiting at most 2 s for a request that holds it (then the record is
// reported held: [server.ErrLeaseLive]).
func (s *Store) DeleteRecord(ctx context.Context, op server.Operation, force bool) (server.Record, error) {
	scope := fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return server.Record{}, wrap("evict", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	start := trace.Begin()
	lock := " FOR UPDATE NOWAIT"
	if s.isMariaDB(ctx, tx) {
		lock = fmt.Sprintf(" FOR UPDATE WAIT %d", evictWait)
	}
	q := `SELECT ` + operatorColumns + ` FROM idem_records WHERE scope_hash = ?` + lock
	rec, err := scanRecord(tx.QueryRowContext(ctx, q, s.clock(), false, false, scope[:]))
	switch {
	case isMySQLErr(err, erLockWaitTimeout) || isMySQLErr(err, erLockNowait):
		return server.Record{}, fmt.Errorf("%w: a request's transaction holds the record (%s)", server.ErrLeaseLive, describe(op))
	case errors.Is(err, sql.ErrNoRows):
		return server.Record{}, fmt.Errorf("%w (%s)", server.ErrUnknownKey, describe(op))
	case err != nil:
		return server.Record{}, wrap("evict", err)
	case !force && rec.State == "running" && rec.LeaseLeft() > 0:
		return rec, fmt.Errorf("%w (%s)", server.ErrLeaseLive, describe(op))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM idem_records WHERE scope_hash = ?`, scope[:]); err != nil {
		return server.Record{}, wrap("evict", err)
	}
	err = tx.Commit()
	if trace.On() { // the row is locked since the SELECT: the DELETE deleted it
		s.traceGone(trace.Evict, []any{scope[:]}, start, err)
	}
	return rec, wrap("evict", err)
}

// exactCountLimit is the most records CountRecords counts exactly.
const exactCountLimit = 10_000

// CountRecords counts the records (see [server.RecordCounts]): exactly up
// to 10,000, past that InnoDB's estimate of the table's size
// (information_schema) when it is larger, else "at least"; the running
// and stuck ones exactly, through their index.
func (s *Store) CountRecords(ctx context.Context) (server.RecordCounts, error) {
	var c server.RecordCounts
	var estimate sql.NullInt64
	var oldest, oldestStuck int64
	off := s.clock()
	q := `SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM idem_records LIMIT ?) AS head),
    (SELECT table_rows FROM information_schema.tables
        WHERE table_schema = DATABASE() AND table_name = 'idem_records'),
    COUNT(*), COALESCE(SUM(locked_until <= ` + now + `), 0),
    COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), ` + now + `), 0),
    COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN locked_until <= ` + now + ` THEN created_at END), ` + now + `), 0)
FROM idem_records WHERE state = 'running'`
	err := s.db.QueryRowContext(ctx, q, exactCountLimit+1, off, off, off, off).
		Scan(&c.Records, &estimate, &c.Running, &c.Stuck, &oldest, &oldestStuck)
	if err != nil {
		return server.RecordCounts{}, wrap("count records", err)
	}
	c.RecordsAre = server.CountExact
	if c.Records > exactCountLimit {
		c.RecordsAre = server.CountAtLeast
		if estimate.Valid && estimate.Int64 > c.Records {
			c.Records, c.RecordsAre = estimate.Int64, server.CountEstimate
		}
	}
	c.OldestRunning = max(time.Duration(oldest)*time.Microsecond, 0)
	c.OldestStuck = max(time.Duration(oldestStuck)*time.Microsecond, 0)
	return c, nil
}

// describe names op's scope in an error.
func describe(op server.Operation) string {
	return fmt.Sprintf("tenant %q, principal %q, route %q, key %q", op.Tenant, op.Principal, op.Route, op.Key)
}
