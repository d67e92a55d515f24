package mysqlidem

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/server"
)

// found is a record as a claim read it, judged at the database's now.
type found struct {
	fpAlg     string
	fp        []byte
	state     string
	token     uuid.UUID
	expired   bool
	leaseLeft time.Duration // <= 0: no live lease
	resp      *server.Response
	expiresAt time.Time // the end of its retention, by the database's clock
}

// verdict is what a claim does with a found record.
type verdict int

const (
	vFinal    verdict = iota // answer with result
	vReclaim                 // expired: claim afresh
	vTakeover                // running, its lease ended: take it over
)

// leased reports a running record whose lease is live, which is never
// treated as expired.
func (f *found) leased() bool { return f.state == "running" && f.leaseLeft > 0 }

// decide judges f for c, by server.Store's rules.
func (f *found) decide(c *server.Claim) (verdict, server.ClaimResult) {
	switch {
	case (f.expired || f.state == "not-applied") && !f.leased() && f.state != "uncertain":
		return vReclaim, server.ClaimResult{}
	case !c.Matches(f.fpAlg, f.fp):
		return vFinal, server.ClaimResult{Verdict: server.VerdictMismatch}
	case f.state == "done":
		return vFinal, server.ClaimResult{Verdict: server.VerdictReplay, Response: f.resp, Expires: f.expiresAt}
	case f.state == "unavailable":
		return vFinal, server.ClaimResult{Verdict: server.VerdictUnavailable}
	case f.state == "uncertain":
		return vFinal, server.ClaimResult{Verdict: server.VerdictUncertain}
	case f.leaseLeft > 0:
		return vFinal, server.ClaimResult{Verdict: server.VerdictInFlight, RetryAfter: f.leaseLeft}
	default:
		return vTakeover, server.ClaimResult{}
	}
}

// queryer is a *sql.DB, *sql.Conn or *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// read reads c's record with query (sqlRead or sqlReadLocked); nil when
// there is none.
func (s *Store) read(ctx context.Context, q queryer, query string, c *server.Claim) (*found, error) {
	var (
		f       found
		token   []byte
		left    sql.NullInt64
		stored  []byte
		expires int64
	)
	off := s.clock()
	err := q.QueryRowContext(ctx, query, off, off, c.Scope[:]).Scan(&f.fpAlg, &f.fp, &f.state, &token,
		&f.expired, &left, &stored, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f.token, err = uuid.FromBytes(token)
	if err != nil {
		return nil, err
	}
	f.expiresAt = utcMicros(expires)
	if left.Valid {
		f.leaseLeft = time.Duration(left.Int64) * time.Microsecond
	}
	if f.state != "running" && len(stored) > 0 {
		f.resp = &server.Response{}
		if err := f.resp.UnmarshalBinary(stored); err != nil {
			return nil, err
		}
	}
	return &f, nil
}

// claimArgs are the arguments of sqlInsertLeased and sqlClaimTx.
func (s *Store) claimArgs(c *server.Claim, token uuid.UUID) []any {
	off := s.clock()
	return []any{c.Scope[:], c.Tenant, c.Principal, c.Route, c.Key, c.DigestAlg, c.Digest, token[:],
		off, leaseArg(c), off, off, micros(c.Retention), requestArg(c)}
}

// reclaimArgs are the arguments of sqlReclaim.
func (s *Store) reclaimArgs(c *server.Claim, token uuid.UUID) []any {
	off := s.clock()
	return []any{c.Tenant, c.Principal, c.Route, c.Key, c.DigestAlg, c.Digest, token[:],
		off, leaseArg(c), off, off, micros(c.Retention), requestArg(c), c.Scope[:], off, off}
}

// takeoverArgs are the arguments of sqlTakeover.
func (s *Store) takeoverArgs(c *server.Claim, token, old uuid.UUID) []any {
	off := s.clock()
	return []any{token[:], off, leaseArg(c), off, micros(c.Retention), c.Scope[:], old[:], off, off}
}

// leaseArg is the lease of a claim: NULL in Transactional mode, whose
// running rows no other request sees (they commit done).
func leaseArg(c *server.Claim) any {
	if c.Mode != server.Leased {
		return nil
	}
	return micros(c.Lease)
}

// requestArg is the stored request: NULL in Transactional mode.
func requestArg(c *server.Claim) any {
	if c.Mode != server.Leased {
		return nil
	}
	return c.Request
}

// steal reclaims an expired record or takes over an expired lease in q;
// won is false when another claim got there first. After a takeover it
// reads the attempt number and the recovery point in q, which must then
// be a transaction (the row stays locked until it ends).
func (s *Store) steal(ctx context.Context, q queryer, c *server.Claim, f *found, v verdict, token uuid.UUID) (g grant, won bool, err error) {
	var r sql.Result
	if v == vReclaim {
		r, err = q.ExecContext(ctx, sqlReclaim, s.reclaimArgs(c, token)...)
	} else {
		r, err = q.ExecContext(ctx, sqlTakeover, s.takeoverArgs(c, token, f.token)...)
	}
	if err != nil {
		return grant{}, false, err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return grant{}, false, err
	}
	if v == vReclaim {
		return grant{attempt: 1}, true, nil
	}
	var point, data []byte
	var rec server.Recovery
	if err := q.QueryRowContext(ctx, sqlRecovery, c.Scope[:]).Scan(&g.attempt, &point, &data); err != nil {
		return grant{}, false, err
	}
	rec.Point, rec.Data = string(point), data
	g.recovery = &rec
	return g, true, nil
}

// grant is what a won claim learned.
type grant struct {
	attempt  int
	recovery *server.Recovery // nil on a first attempt
	inserted bool             // a Transactional claim's new key: its row is the claim's own
}
