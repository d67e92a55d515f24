package mysqlidem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

var (
	_ server.UncertainSettler = fence{}
	_ server.Resolver         = (*Store)(nil)
)

// sqlUncertain leaves an operation uncertain under the reconciler's token.
// The sweep (sqlSweepPick), a reclaim (sqlReclaim), a takeover
// (sqlTakeover) and a reconciler (sqlAbandonedPick) all pass over a record
// in this state, whatever its expiry; its recovery point and request stay.
const sqlUncertain = `UPDATE idem_records SET state = 'uncertain', locked_until = NULL, reconcile_at = NULL,
    writes = writes + 1` + fenced

// sqlResolve settles an uncertain record, checking the state as it writes.
// Args: state ('done' or 'not-applied'), status, response, a new token
// (which fences out anything that still held the old one), applied,
// offset and retention, offset, who, offset, why, scope. An applied record
// answers retries at least a retention from now; one not applied expires
// now: the next claim reclaims it (clearing the resolution) and the sweep
// deletes it. MySQL evaluates a single-table UPDATE's assignments left to
// right, so expires_at is computed from the applied argument, never from
// the state just assigned.
const sqlResolve = `UPDATE idem_records SET state = ?, status = ?, response = ?, token = ?,
    writes = writes + 1, locked_until = NULL, reconcile_at = NULL,
    expires_at = CASE WHEN ? THEN GREATEST(expires_at, ` + now + ` + INTERVAL ? MICROSECOND) ELSE ` + now + ` END,
    resolved_by = ?, resolved_at = ` + now + `, resolve_reason = ?
WHERE scope_hash = ? AND state = 'uncertain'`

// Uncertain leaves the operation uncertain (see [server.UncertainSettler]):
// [server.ErrLeaseLost] and no change when the token is stale.
func (f fence) Uncertain(ctx context.Context) error { return f.exec(ctx, sqlUncertain) }

// Resolve settles the uncertain operation of op's scope (see
// [server.Resolver]) in one UPDATE that checks the state as it writes, and
// reads the record back in the same transaction, which still holds the
// row. A record in another state is left as it is and returned with an
// error that wraps [server.ErrNotUncertain]; none: [server.ErrUnknownKey].
func (s *Store) Resolve(ctx context.Context, op server.Operation, r server.Resolution) (server.Record, error) {
	scope := fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key)
	rec, ok, err := s.resolve(ctx, scope[:], r)
	if err != nil {
		return server.Record{}, wrap("resolve", err)
	}
	if ok {
		return rec, nil
	}
	rec, err = s.ReadRecord(ctx, op, false)
	if err != nil {
		return server.Record{}, err
	}
	return rec, fmt.Errorf("%w: it is %s (%s)", server.ErrNotUncertain, rec.State, describe(op))
}

// resolve runs sqlResolve and reads the resolved record in one
// transaction; ok is false when no uncertain record matched.
func (s *Store) resolve(ctx context.Context, scope []byte, r server.Resolution) (rec server.Record, ok bool, err error) {
	state, status, stored := "not-applied", any(nil), []byte(nil)
	if r.Applied {
		stored, _ = r.Response.MarshalBinary() // never fails
		state, status = "done", r.Response.Status
	}
	token, off, start := uuid.New(), s.clock(), trace.Begin()
	defer func() { s.traceResolve(scope, state, token, ok, start, err) }()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return server.Record{}, false, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	res, err := tx.ExecContext(ctx, sqlResolve, state, status, stored, token[:], r.Applied, off,
		micros(r.Retention), off, r.By, off, r.Reason, scope)
	if err != nil {
		return server.Record{}, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return server.Record{}, false, err
	}
	q := `SELECT ` + operatorColumns + ` FROM idem_records WHERE scope_hash = ? FOR UPDATE`
	rec, err = scanRecord(tx.QueryRowContext(ctx, q, off, false, false, scope))
	if errors.Is(err, sql.ErrNoRows) {
		err = errors.New("the resolved record vanished") // it holds the row's lock: cannot happen
	}
	if err != nil {
		return server.Record{}, false, err
	}
	return rec, true, tx.Commit()
}
