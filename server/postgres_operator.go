package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/trace"
)

// The SQL of PostgresStore's RecordStore methods. Like the claims, they
// judge time by statement_timestamp() plus the store's clock offset.

// recordColumns are the columns of a [Record], without payload, and the
// store's clock (%[1]s is the clock's parameter); mode is [Leased] when the
// record keeps a request (only Leased claims store one).
const recordColumns = `r.tenant, r.principal, r.route, r.idem_key, r.attempt, r.state, r.request IS NOT NULL,
    r.status, r.created_at, r.expires_at, r.locked_until, r.reconcile_at, r.recovery_point, r.recovery_data,
    r.fp_alg, statement_timestamp() + %[1]s::interval, r.resolved_by, r.resolved_at, r.resolve_reason`

// sqlReadRecord reads one record: $1 scope_hash, $2 clock, $3 payload.
var sqlReadRecord = `SELECT ` + fmt.Sprintf(recordColumns, "$2") + `,
    CASE WHEN $3 THEN r.request END, CASE WHEN $3 THEN r.headers END, CASE WHEN $3 THEN r.body END
FROM idem_records AS r WHERE r.scope_hash = $1`

// sqlListRunning reads a page of the running records through their
// partial index, oldest first, after a position: $1 clock, $2 stuck only,
// $3 route ("" for all), $4 to $8 the position (created_at, tenant,
// principal, route, key; compared as bytes, COLLATE "C"), $9 limit.
var sqlListRunning = `SELECT ` + fmt.Sprintf(recordColumns, "$1") + `
FROM idem_records AS r
WHERE (r.state = 'running' OR r.state = 'uncertain')
    AND (NOT $2 OR r.locked_until <= statement_timestamp() + $1::interval)
    AND ($3 = '' OR r.route = $3)
    AND (r.created_at, r.tenant COLLATE "C", r.principal COLLATE "C", r.route COLLATE "C", r.idem_key COLLATE "C")
        > ($4::timestamptz, $5::text COLLATE "C", $6::text COLLATE "C", $7::text COLLATE "C", $8::text COLLATE "C")
ORDER BY r.created_at, r.tenant COLLATE "C", r.principal COLLATE "C", r.route COLLATE "C", r.idem_key COLLATE "C"
LIMIT $9`

// sqlDeleteRecord deletes a record unless its lease is live and force
// ($3) is false: $1 scope_hash, $2 clock. It runs in a transaction whose
// lock_timeout bounds its wait for a request that holds the row.
var sqlDeleteRecord = `DELETE FROM idem_records AS r
WHERE r.scope_hash = $1
    AND ($3 OR NOT (r.state = 'running' AND r.locked_until > statement_timestamp() + $2::interval))
RETURNING ` + fmt.Sprintf(recordColumns, "$2")

// exactCountLimit is the most records CountRecords counts exactly.
const exactCountLimit = 10_000

// sqlCountRecords counts the records up to $2 + 1 (one more tells that
// there are more), takes the planner's estimate of the table's size (-1
// before its first ANALYZE), and counts the running and stuck records
// through their partial index: $1 clock, $2 exactCountLimit.
const sqlCountRecords = `SELECT (SELECT count(*) FROM (SELECT 1 FROM idem_records LIMIT $2 + 1) AS head),
    (SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass('idem_records')),
    count(*), count(*) FILTER (WHERE r.locked_until <= statement_timestamp() + $1::interval),
    coalesce(extract(epoch FROM statement_timestamp() + $1::interval - min(r.created_at)), 0)::float8,
    coalesce(extract(epoch FROM statement_timestamp() + $1::interval
        - min(r.created_at) FILTER (WHERE r.locked_until <= statement_timestamp() + $1::interval)), 0)::float8
FROM idem_records AS r WHERE r.state = 'running'`

// evictLockTimeout bounds the wait of an eviction for a request that
// holds the record's row (a claim reclaiming it, in its transaction).
const evictLockTimeout = "2s"

// ReadRecord returns the record of op's scope (see [RecordStore]), in one
// index lookup.
func (s *PostgresStore) ReadRecord(ctx context.Context, op Operation, payload bool) (Record, error) {
	rec, err := s.readScope(ctx, fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key), payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, fmt.Errorf("%w (%s)", ErrUnknownKey, describe(op))
	}
	return rec, err
}

// ReadRef returns the record whose scope hash is scope (see [RefReader]),
// by its primary key.
func (s *PostgresStore) ReadRef(ctx context.Context, scope [32]byte, payload bool) (Record, error) {
	rec, err := s.readScope(ctx, scope, payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, unknownRef(scope)
	}
	return rec, err
}

// readScope reads the record of scope; the error wraps pgx.ErrNoRows when
// there is none.
func (s *PostgresStore) readScope(ctx context.Context, scope [32]byte, payload bool) (Record, error) {
	var request, header, body []byte
	var rec Record
	err := s.withConn(ctx, func(conn *pgxpool.Conn) error {
		var err error
		rec, err = scanRecord(conn.QueryRow(ctx, sqlReadRecord, scope[:], s.offset(), payload), &request, &header, &body)
		return err
	})
	if err != nil {
		return Record{}, fmt.Errorf("server: read record: %w", err)
	}
	if payload {
		if err := rec.setPayload(request, header, body); err != nil {
			return Record{}, err
		}
	}
	return rec, nil
}

// ListRunning returns a page of running records (see [RecordStore]).
func (s *PostgresStore) ListRunning(ctx context.Context, q InFlightQuery) ([]Record, error) {
	after := q.After
	var created any = after.CreatedAt
	if after.CreatedAt.IsZero() {
		created = "-infinity"
	}
	var recs []Record
	err := s.withConn(ctx, func(conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, sqlListRunning, s.offset(), q.Stuck, q.Route, created,
			after.Tenant, after.Principal, after.Route, after.Key, q.Limit)
		if err != nil {
			return err
		}
		recs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Record, error) { return scanRecord(row) })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("server: list running records: %w", err)
	}
	return recs, nil
}

// DeleteRecord deletes the record of op's scope (see [RecordStore]) in one
// statement, which waits at most 2 s for a request that holds its row,
// then reports the record as held ([ErrLeaseLive]).
func (s *PostgresStore) DeleteRecord(ctx context.Context, op Operation, force bool) (Record, error) {
	scope := fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key)
	var rec Record
	var deleted bool
	start := trace.Begin()
	err := s.withConn(ctx, func(conn *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+evictLockTimeout+"'"); err != nil {
				return err
			}
			var err error
			rec, err = scanRecord(tx.QueryRow(ctx, sqlDeleteRecord, scope[:], s.offset(), force))
			deleted = err == nil
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
	})
	var pgErr *pgconn.PgError
	if trace.On() && !(errors.As(err, &pgErr) && pgErr.Code == "55P03") {
		s.emitPG(scope, trace.Step{Op: trace.Evict, OK: deleted}, start, err)
	}
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "55P03":
		return Record{}, fmt.Errorf("%w: a request's transaction holds the record (%s)", ErrLeaseLive, describe(op))
	case err != nil:
		return Record{}, fmt.Errorf("server: evict: %w", err)
	case deleted:
		return rec, nil
	}
	// Nothing deleted: the record is absent, or its lease is live.
	rec, err = s.ReadRecord(ctx, op, false)
	if err != nil {
		return Record{}, err
	}
	return rec, fmt.Errorf("%w (%s)", ErrLeaseLive, describe(op))
}

// CountRecords counts the records (see [RecordCounts]) in one statement
// over the running records' partial index.
func (s *PostgresStore) CountRecords(ctx context.Context) (RecordCounts, error) {
	var c RecordCounts
	var estimate *int64
	var oldest, oldestStuck float64
	err := s.withConn(ctx, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, sqlCountRecords, s.offset(), exactCountLimit).
			Scan(&c.Records, &estimate, &c.Running, &c.Stuck, &oldest, &oldestStuck)
	})
	if err != nil {
		return RecordCounts{}, fmt.Errorf("server: count records: %w", err)
	}
	c.RecordsAre = CountExact
	if c.Records > exactCountLimit {
		c.RecordsAre = CountAtLeast
		if estimate != nil && *estimate > c.Records {
			c.Records, c.RecordsAre = *estimate, CountEstimate
		}
	}
	c.OldestRunning = seconds(oldest)
	c.OldestStuck = seconds(oldestStuck)
	return c, nil
}

// sqlFindKey reads the records of a key, in every scope, oldest first:
// $1 key, $2 clock, $3 limit. No index has the key first: it reads the
// table, as an operator's lookup may.
var sqlFindKey = `SELECT ` + fmt.Sprintf(recordColumns, "$2") + `
FROM idem_records AS r WHERE r.idem_key = $1
ORDER BY r.created_at, r.tenant COLLATE "C", r.principal COLLATE "C", r.route COLLATE "C"
LIMIT $3`

// FindKey returns the records of key in every scope (see [RecordStore]),
// in one statement that reads the table.
func (s *PostgresStore) FindKey(ctx context.Context, key string, limit int) ([]Record, error) {
	var recs []Record
	err := s.withConn(ctx, func(conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, sqlFindKey, key, s.offset(), limit)
		if err != nil {
			return err
		}
		recs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Record, error) { return scanRecord(row) })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("server: find key: %w", err)
	}
	return recs, nil
}

// withConn runs f on a connection of the pool ([DB] has no Query of its
// own: the claims acquire theirs).
func (s *PostgresStore) withConn(ctx context.Context, f func(conn *pgxpool.Conn) error) error {
	conn, err := s.db.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return f(conn)
}

func seconds(s float64) time.Duration { return max(time.Duration(s*float64(time.Second)), 0) }

// scanRecord reads recordColumns, then the payload columns into extra.
func scanRecord(row pgx.Row, extra ...any) (Record, error) {
	var (
		rec          Record
		leased       bool
		status       *int
		point        *string
		data         []byte
		lease, recon *time.Time
		by, why      *string
		resolvedAt   *time.Time
	)
	dest := []any{&rec.Tenant, &rec.Principal, &rec.Route, &rec.Key, &rec.Attempt, &rec.State, &leased,
		&status, &rec.CreatedAt, &rec.ExpiresAt, &lease, &recon, &point, &data, &rec.FingerprintAlg, &rec.ReadAt,
		&by, &resolvedAt, &why}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return Record{}, err
	}
	if by != nil && resolvedAt != nil && why != nil {
		rec.Resolved = &Resolved{By: *by, Reason: *why, At: *resolvedAt, Applied: rec.State == string(stateDone)}
	}
	if leased {
		rec.Mode = Leased
	}
	if status != nil {
		rec.Status = *status
	}
	if lease != nil && rec.State == string(stateRunning) {
		rec.LeaseEnds = *lease
	}
	if recon != nil {
		rec.ReconcileAt = *recon
	}
	if point != nil {
		rec.Recovery = &Recovery{Point: *point, Data: data}
	}
	return rec, nil
}

// setPayload decodes the stored request and response into rec.
func (rec *Record) setPayload(request, header, body []byte) error {
	if request != nil {
		req, err := decodeStoredRequest(request)
		if err != nil {
			return err
		}
		rec.Request = req
	}
	status := &rec.Status
	if rec.Status == 0 {
		status = nil
	}
	res, err := responseOf(recordState(rec.State), status, header, body)
	if res != nil {
		rec.Header, rec.Body = res.Header, res.Body
	}
	return err
}

// ParseStoredRequest reads the stored form of a request ([Claim.Request])
// into a [StoredRequest], for a [RecordStore] that keeps that form as its
// bytes and returns it in [Record.Request].
func ParseStoredRequest(b []byte) (*StoredRequest, error) { return decodeStoredRequest(b) }

// decodeStoredRequest reads a stored request (encodeRequest's form).
func decodeStoredRequest(b []byte) (*StoredRequest, error) {
	r, err := decodeRequest(context.Background(), b)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(r.Body) // a bytes.Reader
	return &StoredRequest{Method: r.Method, URI: r.RequestURI, Pattern: r.Pattern, Header: r.Header, Body: body}, nil
}

// describe names op's scope in an error.
func describe(op Operation) string {
	return fmt.Sprintf("tenant %q, principal %q, route %q, key %q", op.Tenant, op.Principal, op.Route, op.Key)
}
