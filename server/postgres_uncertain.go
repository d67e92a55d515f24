package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/trace"
)

// sqlUncertain leaves an operation uncertain under the reconciler's token
// (pgFence: $1 scope_hash, $2 token). The sweep, a reclaim and a takeover
// all pass over a record in this state, whatever its expiry.
const sqlUncertain = `UPDATE idem_records SET state = 'uncertain', locked_until = NULL, reconcile_at = NULL
WHERE scope_hash = $1 AND token = $2 AND state = 'running'`

// sqlResolve settles an uncertain record, checking the state as it writes:
// $1 scope_hash, $2 clock, $3 state ('done' or 'not-applied'), $4 status,
// $5 headers (responseValues; NULL when not applied), $6 retention of an
// applied record, $7 who, $8 why, $9 the new token. A record not applied
// expires now: it counts as absent, the next claim reclaims it (clearing
// the resolution), and the sweep deletes it. The new token fences out
// anything that still held the old one.
var sqlResolve = `UPDATE idem_records AS r SET state = $3::text, status = $4, headers = $5, body = NULL,
    token = $9, locked_until = NULL, reconcile_at = NULL,
    expires_at = CASE WHEN $3::text = 'done'
        THEN greatest(r.expires_at, statement_timestamp() + $2::interval + $6::interval)
        ELSE statement_timestamp() + $2::interval END,
    resolved_by = $7, resolve_reason = $8, resolved_at = statement_timestamp() + $2::interval
WHERE r.scope_hash = $1 AND r.state = 'uncertain'
RETURNING ` + fmt.Sprintf(recordColumns, "$2")

// Uncertain leaves the operation uncertain (see [UncertainSettler]).
func (f pgFence) Uncertain(ctx context.Context) error {
	return f.exec(ctx, sqlUncertain)
}

// Resolve settles an uncertain operation in one statement (see [Resolver]).
func (s *PostgresStore) Resolve(ctx context.Context, op Operation, r Resolution) (Record, error) {
	scope := fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key)
	state, status, headers := string(stateNotApplied), (*int)(nil), []byte(nil)
	if r.Applied {
		state, status, headers = responseValues(r.Response)
	}
	var rec Record
	token, start := uuid.New(), trace.Begin()
	err := s.withConn(ctx, func(conn *pgxpool.Conn) error {
		var err error
		rec, err = scanRecord(conn.QueryRow(ctx, sqlResolve, scope[:], s.offset(), state, status, headers,
			r.Retention, r.By, r.Reason, token))
		return err
	})
	s.traceResolve(scope, state, token, start, err)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		rec, err = s.ReadRecord(ctx, op, false)
		if err != nil {
			return Record{}, err
		}
		return rec, fmt.Errorf("%w: it is %s (%s)", ErrNotUncertain, rec.State, describe(op))
	case err != nil:
		return Record{}, fmt.Errorf("server: resolve: %w", err)
	}
	return rec, nil
}
