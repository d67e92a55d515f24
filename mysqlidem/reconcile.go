package mysqlidem

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// sqlAbandonedPick picks at most a limit of abandoned operations of some
// routes (running, lease ended, due, within retention), oldest lease first,
// skipping the rows a claim or another reconciler holds: offset, offset,
// offset, then the routes, then the limit (the IN list is spliced in).
const sqlAbandonedPick = `SELECT scope_hash FROM idem_records
WHERE state = 'running' AND locked_until <= ` + now + `
    AND (reconcile_at IS NULL OR reconcile_at <= ` + now + `) AND expires_at > ` + now + `
    AND route IN (%s)
ORDER BY locked_until LIMIT ? FOR UPDATE SKIP LOCKED`

// sqlAbandonedTake takes one picked operation over under a new token and
// a lease, and keeps the record at least two leases: token, offset and
// lease, offset and two leases, scope.
const sqlAbandonedTake = `UPDATE idem_records SET token = ?, attempt = attempt + 1, writes = writes + 1,
    locked_until = ` + now + ` + INTERVAL ? MICROSECOND,
    expires_at = GREATEST(expires_at, ` + now + ` + INTERVAL ? MICROSECOND), reconcile_at = NULL
WHERE scope_hash = ?`

// sqlAbandonedRead reads a taken operation: offset, scope.
const sqlAbandonedRead = `SELECT tenant, principal, route, idem_key, attempt, recovery_point, recovery_data,
    request, TIMESTAMPDIFF(MICROSECOND, created_at, ` + now + `)
FROM idem_records WHERE scope_hash = ?`

// TakeAbandoned takes over at most limit abandoned operations of routes in
// one READ COMMITTED transaction: it picks them with SKIP LOCKED (a claim's
// or another reconciler's rows are skipped, and no gap is locked), takes
// each over under a new token and reads it back.
func (s *Store) TakeAbandoned(ctx context.Context, routes []string, lease time.Duration, limit int) ([]*server.Taken, error) {
	if len(routes) == 0 || limit <= 0 {
		return nil, nil
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, wrap("take abandoned", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	off, start := s.clock(), trace.Begin()
	args := []any{off, off, off}
	for _, r := range routes {
		args = append(args, r)
	}
	q := sqlAbandonedPickFor(len(routes))
	scopes, err := collectScopes(tx.QueryContext(ctx, q, append(args, limit)...))
	if err != nil {
		return nil, wrap("take abandoned", err)
	}
	taken := make([]*server.Taken, 0, len(scopes))
	for _, scope := range scopes {
		t, err := s.take(ctx, tx, scope.([]byte), lease)
		if err != nil {
			return nil, wrap("take abandoned", err)
		}
		taken = append(taken, t)
	}
	err = tx.Commit()
	if trace.On() {
		s.traceTaken(taken, start, err)
	}
	return taken, wrap("take abandoned", err)
}

// sqlAbandonedPickFor is sqlAbandonedPick for n routes.
func sqlAbandonedPickFor(n int) string {
	return fmt.Sprintf(sqlAbandonedPick, placeholders(n))
}

// take takes one picked operation over in tx and reads it back.
func (s *Store) take(ctx context.Context, tx *sql.Tx, scope []byte, lease time.Duration) (*server.Taken, error) {
	token := uuid.New()
	off := s.clock()
	if _, err := tx.ExecContext(ctx, sqlAbandonedTake, token[:], off, micros(lease), off, micros(2*lease), scope); err != nil {
		return nil, err
	}
	var (
		t                 server.Taken
		tenant, principal []byte
		route, key, point []byte
		data              []byte
		ageMicros         int64
	)
	err := tx.QueryRowContext(ctx, sqlAbandonedRead, off, scope).Scan(&tenant, &principal, &route, &key,
		&t.Attempt, &point, &data, &t.Request, &ageMicros)
	if err != nil {
		return nil, err
	}
	t.Tenant, t.Principal, t.Route, t.Key = string(tenant), string(principal), string(route), string(key)
	t.Recovery.Point, t.Recovery.Data = string(point), data
	t.Age = time.Duration(ageMicros) * time.Microsecond
	f := fence{s: s, token: token}
	copy(f.scope[:], scope)
	t.Settler = f
	return &t, nil
}

// Free deletes the record: a later retry runs afresh.
func (f fence) Free(ctx context.Context) error { return f.exec(ctx, sqlFree) }

// Postpone ends the lease now and makes the operation due again after wait.
func (f fence) Postpone(ctx context.Context, wait time.Duration) error {
	off := f.s.clock()
	return f.exec(ctx, sqlPostpone, off, off, micros(wait))
}
