package mysqlidem

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// maxClaimRounds bounds the re-reads of a record that changes under a claim.
const maxClaimRounds = 4

// errClaimContention is returned by a claim that kept finding the record
// changed under it (deleted, taken over) and gave up.
var errClaimContention = errors.New("mysqlidem: claim did not settle: the record kept changing")

// claimLeased claims c's key in statements that each commit on their own,
// so that the lease is durable before the handler runs: an INSERT IGNORE
// of the running row, else a read, and a reclaim or a takeover fenced by
// what it read.
func (s *Store) claimLeased(ctx context.Context, c *server.Claim) (server.ClaimResult, error) {
	token := uuid.New()
	for range maxClaimRounds {
		start := trace.Begin()
		r, err := s.db.ExecContext(ctx, sqlInsertLeased, s.claimArgs(c, token)...)
		var n int64
		if err == nil {
			n, _ = r.RowsAffected()
		}
		s.traceClaim(c, trace.Insert, uuid.Nil, token, n == 1, start, err)
		if err != nil {
			return server.ClaimResult{}, wrap("claim", err)
		}
		if n == 1 {
			return s.leased(c, token, grant{attempt: 1}), nil
		}
		start = trace.Begin()
		f, err := s.read(ctx, s.db, sqlRead, c)
		if err != nil {
			return server.ClaimResult{}, wrap("claim", err)
		}
		s.traceRead(c, f, start)
		if f == nil {
			continue // swept since the insert saw it
		}
		v, res := f.decide(c)
		if v == vFinal {
			return res, nil
		}
		g, won, err := s.stealLeased(ctx, c, f, v, token)
		if err != nil {
			return server.ClaimResult{}, wrap("claim", err)
		}
		if won {
			return s.leased(c, token, g), nil
		}
	}
	return server.ClaimResult{}, errClaimContention
}

// stealLeased reclaims or takes over in a transaction of its own, which
// reads the recovery point under the row lock of its update.
func (s *Store) stealLeased(ctx context.Context, c *server.Claim, f *found, v verdict, token uuid.UUID) (g grant, won bool, err error) {
	start := trace.Begin()
	defer func() { s.traceClaim(c, stealOp(v), f.token, token, won, start, err) }()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return grant{}, false, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	g, won, err = s.steal(ctx, tx, c, f, v, token)
	if err != nil || !won {
		return grant{}, false, err
	}
	return g, true, tx.Commit()
}

func (s *Store) leased(c *server.Claim, token uuid.UUID, g grant) server.ClaimResult {
	return server.ClaimResult{Verdict: server.VerdictClaimed, Attempt: &leasedAttempt{
		fence: fence{s: s, scope: c.Scope, token: token}, g: g}}
}

// fence runs the token-fenced statements of an attempt, in autocommit.
type fence struct {
	s     *Store
	scope [32]byte
	token uuid.UUID
}

// exec runs a fenced statement (args first, then scope and token);
// [server.ErrLeaseLost] when it matched no row.
func (f fence) exec(ctx context.Context, query string, args ...any) error {
	start := trace.Begin()
	err := f.run(ctx, query, args...)
	if trace.On() {
		f.trace(query, args, start, err)
	}
	return err
}

func (f fence) run(ctx context.Context, query string, args ...any) error {
	r, err := f.s.db.ExecContext(ctx, query, append(args, f.scope[:], f.token[:])...)
	if err != nil {
		return wrap("fenced write", err)
	}
	if n, err := r.RowsAffected(); err != nil || n == 0 {
		return errors.Join(server.ErrLeaseLost, err)
	}
	return nil
}

// Complete stores res under the token.
func (f fence) Complete(ctx context.Context, res *server.Response) error {
	stored, _ := res.MarshalBinary() // never fails
	return f.exec(ctx, completeSQL(), state(res), status(res), stored)
}

// Abort releases the key of a refused first attempt that recorded no
// recovery point, and otherwise ends the lease now, keeping the record
// and its recovery point for the next attempt.
func (f fence) Abort(ctx context.Context, reject bool) error {
	if reject {
		if err := f.exec(ctx, sqlRelease); !errors.Is(err, server.ErrLeaseLost) {
			return err
		}
	}
	return f.exec(ctx, sqlEndLease, f.s.clock())
}

// Extend makes the lease end d from now, and the expiry at least margin
// after that.
func (f fence) Extend(ctx context.Context, d, margin time.Duration) error {
	off := f.s.clock()
	return f.exec(ctx, sqlExtend, off, micros(d), off, micros(d+margin))
}

// Checkpoint records a recovery point.
func (f fence) Checkpoint(ctx context.Context, point string, data []byte) error {
	return f.exec(ctx, sqlCheckpoint, point, data)
}

// state is the state column of a record completed with res.
func state(res *server.Response) string {
	if res.Unavailable {
		return "unavailable"
	}
	return "done"
}

// status is the status column: NULL for a parked operation, which has none.
func status(res *server.Response) any {
	if res.Status == 0 {
		return sql.NullInt64{}
	}
	return res.Status
}

// leasedAttempt is a Leased claim: the fence and what the claim learned.
type leasedAttempt struct {
	fence
	g grant
}

func (a *leasedAttempt) Number() int { return a.g.attempt }

func (a *leasedAttempt) Recovery() (server.Recovery, bool) {
	if a.g.recovery == nil {
		return server.Recovery{}, false
	}
	return *a.g.recovery, true
}
