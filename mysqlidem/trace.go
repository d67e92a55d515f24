package mysqlidem

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// Store's steps for internal/trace, emitted only while a test records
// (trace.On). Each step is stamped with the interval from before its
// first statement to after its commit: an autocommit statement commits
// inside its own call, and a step in a transaction (a steal, the
// reconciler's take, the sweep, an eviction, a resolution, a
// Transactional attempt's commit) holds the row's exclusive InnoDB lock
// from its locking statement to its COMMIT, so no other write of the row
// commits in between. The row lock thus orders the commits of one record,
// and that order is one of those the intervals allow, which is what the
// checker searches. A Transactional claim's statements are uncommitted
// until its commit, which is its one write step (trace.Commit); its
// locking read of a row it did not insert is a step, as it reads the
// latest committed row under the lock.

// traceScope names a record in traces: the database of s's connections,
// so that two stores on one database (two nodes, two processes) share
// their records' traces, and the scope's hash.
func (s *Store) traceScope(scope [32]byte) string {
	return "mysql:" + s.traceDB() + ":" + hex.EncodeToString(scope[:8])
}

// traceDB is the name of the database of s's connections, asked until it
// is answered. Claim asks first, holding no connection: a Transactional
// attempt emits its commit while it holds one, and must not wait for
// another in a pool that its duplicates may have exhausted.
func (s *Store) traceDB() string {
	s.traceMu.Lock()
	defer s.traceMu.Unlock()
	if s.traceName == "" {
		var name sql.NullString
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.db.QueryRowContext(ctx, `SELECT DATABASE()`).Scan(&name); err != nil {
			return "?"
		}
		s.traceName = name.String
	}
	return s.traceName
}

// emit emits a step of s on scope that ran from start to now, with the
// outcome its error says: unknown when a statement or the commit failed
// (it may have committed before the connection broke), refused on
// [server.ErrLeaseLost] or no row.
func (s *Store) emit(scope [32]byte, st trace.Step, start time.Time, err error) {
	st.Scope, st.Start, st.End = s.traceScope(scope), start, trace.Now()
	if err != nil && !errors.Is(err, server.ErrLeaseLost) && !errors.Is(err, sql.ErrNoRows) {
		st.OK, st.Unknown = false, true
	}
	trace.Emit(st)
}

// traceRead emits what a claim's read found (f nil: no record).
func (s *Store) traceRead(c *server.Claim, f *found, start time.Time) {
	if !trace.On() {
		return
	}
	saw := trace.None
	if f != nil {
		saw = trace.State{Kind: f.state, Token: f.token}
	}
	s.emit(c.Scope, trace.Step{Op: trace.Read, Saw: saw}, start, nil)
}

// traceClaim emits a Leased claim's insert, reclaim or takeover (of the
// record read under read), which wrote token when won.
func (s *Store) traceClaim(c *server.Claim, op trace.Op, read, token uuid.UUID, won bool, start time.Time, err error) {
	if trace.On() {
		s.emit(c.Scope, trace.Step{Op: op, Token: read, New: token, OK: won}, start, err)
	}
}

// stealOp is the step of a steal's verdict.
func stealOp(v verdict) trace.Op {
	if v == vReclaim {
		return trace.Reclaim
	}
	return trace.Takeover
}

// trace emits a fenced statement of an attempt or a settlement; args are
// the statement's own, before scope and token.
func (f fence) trace(query string, args []any, start time.Time, err error) {
	st := trace.Step{Token: f.token, OK: err == nil}
	switch query {
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
		st.Op, st.Wrote = trace.Settle, trace.State{Kind: "uncertain"}
	default:
		return
	}
	f.s.emit(f.scope, st, start, err)
}

// traceTaken emits the reconciler's takes, which committed together (err:
// the commit's).
func (s *Store) traceTaken(taken []*server.Taken, start time.Time, err error) {
	for _, t := range taken {
		f := t.Settler.(fence)
		s.emit(f.scope, trace.Step{Op: trace.Take, New: f.token, OK: err == nil}, start, err)
	}
}

// traceGone emits a sweep's or an eviction's deletion of each of scopes,
// which committed together (err: the commit's).
func (s *Store) traceGone(op trace.Op, scopes []any, start time.Time, err error) {
	for _, sc := range scopes {
		var scope [32]byte
		copy(scope[:], sc.([]byte))
		s.emit(scope, trace.Step{Op: op, OK: err == nil}, start, err)
	}
}

// traceResolve emits an operator's resolution of scope, which wrote state
// under token when it took effect.
func (s *Store) traceResolve(scope []byte, state string, token uuid.UUID, ok bool, start time.Time, err error) {
	if trace.On() {
		var sc [32]byte
		copy(sc[:], scope)
		s.emit(sc, trace.Step{Op: trace.Resolve, New: token, OK: ok, Wrote: trace.State{Kind: state}}, start, err)
	}
}

// traceCommit emits a Transactional attempt's commit of res: a new key's
// (Token nil) or a stolen record's (Token the attempt's).
func (a *txAttempt) traceCommit(res *server.Response, start time.Time, err error) {
	if !trace.On() {
		return
	}
	st := trace.Step{Op: trace.Commit, New: a.token, OK: err == nil, Wrote: trace.State{Kind: state(res)}}
	if !a.fresh {
		st.Token = a.token
	}
	if errors.Is(err, server.ErrTxEnded) { // the record was not written, nor committed
		err = nil
	}
	a.s.emit(a.c.Scope, st, start, err)
}

// traceEnded emits what a handler that ended the transaction itself
// (COMMIT) committed, which clearEnded then deleted: the running row under
// the attempt's token, committed at some point since the claim began,
// and its deletion. A row that another claim took over before the
// deletion goes unrecorded (the DELETE then matches nothing, and the
// store cannot tell a handler's COMMIT from its ROLLBACK), and the check
// would refuse that takeover: no suite has a handler commit and a
// duplicate take its key over meanwhile.
func (a *txAttempt) traceEnded(start time.Time) {
	st := trace.Step{Op: trace.Commit, New: a.token, OK: true, Wrote: trace.State{Kind: "running"}}
	if !a.fresh {
		st.Token = a.token
	}
	a.s.emit(a.c.Scope, st, a.began, nil)
	a.s.emit(a.c.Scope, trace.Step{Op: trace.Release, Token: a.token, OK: true}, start, nil)
}

// The fault seeded for internal/trace's mutant test (trace.Seed).

// mutantComplete is sqlComplete without its token (its argument stays, so
// that the arguments line up): trace.CompleteIgnoresToken.
var mutantComplete = strings.Replace(sqlComplete, "AND token = ?", "AND ? IS NOT NULL", 1)

// completeSQL is sqlComplete, or its mutant when seeded.
func completeSQL() string {
	if trace.Seeded(trace.CompleteIgnoresToken) {
		return mutantComplete
	}
	return sqlComplete
}
