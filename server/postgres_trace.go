package server

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/trace"
)

// PostgresStore's steps for internal/trace, emitted only while a test
// records (trace.On). Each step is stamped with the interval of its
// statement: the statement commits inside it, and the row lock (or the
// scope's advisory lock) orders the commits of one record, so the commit
// order is one of the orders the intervals allow, which is what the
// checker searches. Only [Leased] records are traced: a [Transactional]
// claim's statements commit or roll back with the handler's transaction.

// traceScope names a record in traces: the database and the schema of the
// pool, so that two stores on one table share their records' traces.
func (s *PostgresStore) traceScope(scope [32]byte) string {
	where := "pg"
	if p, ok := s.db.(*pgxpool.Pool); ok {
		cc := p.Config().ConnConfig
		where = "pg:" + cc.Host + "/" + cc.Database + "/" + cc.RuntimeParams["search_path"]
	}
	return where + ":" + hex.EncodeToString(scope[:8])
}

// emitPG emits a step of s on scope that ran from start to now, with the
// outcome its error says: unknown when the statement failed (it may have
// committed before the connection broke), refused on ErrLeaseLost or no
// row.
func (s *PostgresStore) emitPG(scope [32]byte, st trace.Step, start time.Time, err error) {
	st.Scope, st.Start, st.End = s.traceScope(scope), start, trace.Now()
	if err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, pgx.ErrNoRows) {
		st.OK, st.Unknown = false, true
	}
	trace.Emit(st)
}

// traceRead emits what a [Leased] claim's read found.
func (s *PostgresStore) traceRead(c *Claim, f *found, start time.Time) {
	if !trace.On() || c.Mode != Leased {
		return
	}
	saw := trace.None
	if f != nil {
		saw = trace.State{Kind: string(f.state), Token: f.token}
	}
	s.emitPG(c.Scope, trace.Step{Op: trace.Read, Saw: saw}, start, nil)
}

// traceClaim emits a [Leased] claim's insert, reclaim or takeover (of
// the record read under read), which wrote token when won.
func (s *PostgresStore) traceClaim(c *Claim, op trace.Op, read, token uuid.UUID, won bool, start time.Time, err error) {
	if trace.On() && c.Mode == Leased {
		s.emitPG(c.Scope, trace.Step{Op: op, Token: read, New: token, OK: won}, start, err)
	}
}

// traceFence emits a fenced statement of an attempt or a settlement.
func (f pgFence) trace(sql string, args []any, start time.Time, err error) {
	st := trace.Step{Token: f.token, OK: err == nil}
	switch sql {
	case sqlComplete, mutantComplete:
		st.Op, st.Wrote = trace.Complete, trace.State{Kind: args[0].(string)}
	case sqlExtend:
		st.Op = trace.Extend
	case sqlCheckpoint:
		st.Op = trace.Checkpoint
	case sqlRelease:
		st.Op = trace.Release
	case sqlEndLease:
		st.Op = trace.EndLease
	case sqlFree:
		st.Op, st.Wrote = trace.Settle, trace.None
	case sqlPostpone:
		st.Op, st.Wrote = trace.Settle, trace.State{Kind: "running"}
	case sqlUncertain:
		st.Op, st.Wrote = trace.Settle, trace.State{Kind: string(stateUncertain)}
	default:
		return
	}
	f.s.emitPG(f.scope, st, start, err)
}

// traceResolve emits an operator's resolution of scope, which wrote state
// under token when it took effect.
func (s *PostgresStore) traceResolve(scope [32]byte, state string, token uuid.UUID, start time.Time, err error) {
	if trace.On() {
		s.emitPG(scope, trace.Step{Op: trace.Resolve, New: token, OK: err == nil, Wrote: trace.State{Kind: state}}, start, err)
	}
}

// traceTaken emits the reconciler's takes.
func (s *PostgresStore) traceTaken(taken []*Taken, start time.Time) {
	for _, t := range taken {
		f := t.Settler.(pgFence)
		s.emitPG(f.scope, trace.Step{Op: trace.Take, New: f.token, OK: true}, start, nil)
	}
}

// sweepTraced is Sweep while a test records: the same statement, which
// also returns the scopes it deleted.
func (s *PostgresStore) sweepTraced(ctx context.Context, limit int) (int, error) {
	q, ok := s.db.(interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	})
	if !ok { // a DB without Query: its sweeps go untraced
		tag, err := s.db.Exec(ctx, sqlSweep, limit, s.offset())
		return int(tag.RowsAffected()), err
	}
	start := trace.Now()
	rows, err := q.Query(ctx, sqlSweep+" RETURNING scope_hash", limit, s.offset())
	if err != nil {
		return 0, err
	}
	scopes, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	for _, sc := range scopes {
		var scope [32]byte
		copy(scope[:], sc)
		s.emitPG(scope, trace.Step{Op: trace.Sweep, OK: true}, start, nil)
	}
	return len(scopes), err
}

// The faults seeded for internal/trace's mutant tests (trace.Seed).

// mutantComplete is sqlComplete without its token: trace.CompleteIgnoresToken.
var mutantComplete = strings.Replace(sqlComplete, "AND token = $2", "AND $2::uuid IS NOT NULL", 1)

// mutantTakeover is sqlTakeover that trusts its read: no token, no lease
// end (trace.TakeoverTrustsRead).
var mutantTakeover = strings.Replace(sqlTakeover,
	"r.token = $5 AND r.state = 'running'\n    AND r.locked_until <= clock.t AND r.expires_at > clock.t",
	"$5::uuid IS NOT NULL AND r.state <> ''", 1)

// completeSQL is sqlComplete, or its mutant when seeded.
func completeSQL() string {
	if trace.Seeded(trace.CompleteIgnoresToken) {
		return mutantComplete
	}
	return sqlComplete
}

// takeoverSQL is sqlTakeover, or its mutant when seeded.
func takeoverSQL() string {
	if trace.Seeded(trace.TakeoverTrustsRead) {
		return mutantTakeover
	}
	return sqlTakeover
}

// stealOp is the step of a steal's verdict.
func stealOp(v Verdict) trace.Op {
	if v == vReclaim {
		return trace.Reclaim
	}
	return trace.Takeover
}

// traceCommit emits a [Transactional] attempt's commit.
func (a *pgTxAttempt) traceCommit(res *Response, tags []pgconn.CommandTag, start time.Time, err error) {
	st := trace.Step{Op: trace.Commit, New: a.token, Wrote: trace.State{Kind: string(res.state())}}
	if !a.fresh {
		st.Token = a.token
	}
	st.OK = err == nil && len(tags) == 2 && tags[0].RowsAffected() == 1 && tags[1].String() == "COMMIT"
	a.s.emitPG(a.c.Scope, st, start, err)
}
