package server

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/trace"
)

// sqlTakeAbandoned takes over at most $2 abandoned operations of the
// routes $1 (running, lease ended, due, within retention), oldest lease
// first, skipping any that a claim or another reconciler holds, each under
// a new token and a lease of $3: $4 clock. Like a takeover, it makes the
// record live at least a lease past the new lease. The row locks of
// FOR UPDATE and the token each UPDATE replaces exclude a retry's takeover
// of the same operation, which matches the token it read.
const sqlTakeAbandoned = `WITH clock AS (SELECT statement_timestamp() + $4::interval AS t),
due AS (
    SELECT r.scope_hash FROM idem_records AS r, clock
    WHERE r.state = 'running' AND r.locked_until <= clock.t AND r.route = ANY($1)
        AND (r.reconcile_at IS NULL OR r.reconcile_at <= clock.t) AND r.expires_at > clock.t
    ORDER BY r.locked_until
    LIMIT $2
    FOR UPDATE OF r SKIP LOCKED)
UPDATE idem_records AS r SET token = gen_random_uuid(), attempt = r.attempt + 1,
    locked_until = clock.t + $3::interval, expires_at = greatest(r.expires_at, clock.t + 2 * $3::interval),
    reconcile_at = NULL
FROM due, clock
WHERE r.scope_hash = due.scope_hash
RETURNING r.scope_hash, r.tenant, r.principal, r.route, r.idem_key, r.token, r.attempt,
    r.recovery_point, r.recovery_data, r.request,
    (extract(epoch FROM clock.t - r.created_at) * 1000000)::bigint`

// sqlFree deletes the record of an operation that did not happen.
const sqlFree = `DELETE FROM idem_records WHERE scope_hash = $1 AND token = $2 AND state = 'running'`

// sqlPostpone ends the lease now and makes the operation due for a
// reconciler after $4: $3 clock.
const sqlPostpone = `UPDATE idem_records SET locked_until = statement_timestamp() + $3::interval,
    reconcile_at = statement_timestamp() + $3::interval + $4::interval
WHERE scope_hash = $1 AND token = $2 AND state = 'running'`

// TakeAbandoned takes over abandoned operations of routes in one
// statement (sqlTakeAbandoned) that skips the rows another transaction
// holds.
func (s *PostgresStore) TakeAbandoned(ctx context.Context, routes []string, lease time.Duration, limit int) ([]*Taken, error) {
	conn, err := s.db.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	start := trace.Begin()
	rows, err := conn.Query(ctx, sqlTakeAbandoned, routes, limit, lease, s.offset())
	if err != nil {
		return nil, err
	}
	taken, err := pgx.CollectRows(rows, s.scanTaken)
	if trace.On() {
		s.traceTaken(taken, start)
	}
	return taken, err
}

func (s *PostgresStore) scanTaken(row pgx.CollectableRow) (*Taken, error) {
	var (
		scope, request []byte
		token          [16]byte
		point          *string
		t              Taken
		ageMicros      int64
	)
	err := row.Scan(&scope, &t.Tenant, &t.Principal, &t.Route, &t.Key, &token, &t.Attempt,
		&point, &t.Recovery.Data, &request, &ageMicros)
	if err != nil {
		return nil, err
	}
	if point != nil {
		t.Recovery.Point = *point
	}
	t.Request = request
	t.Age = time.Duration(ageMicros) * time.Microsecond
	f := pgFence{s: s, token: uuid.UUID(token)}
	copy(f.scope[:], scope)
	t.Settler = f
	return &t, nil
}

func (f pgFence) Free(ctx context.Context) error {
	return f.exec(ctx, sqlFree)
}

func (f pgFence) Postpone(ctx context.Context, wait time.Duration) error {
	return f.exec(ctx, sqlPostpone, f.s.offset(), wait)
}
