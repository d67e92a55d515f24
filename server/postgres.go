package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/localclaim"
	"github.com/idemkit/idem/internal/trace"
)

// DB is what [PostgresStore] needs of a connection pool; *pgxpool.Pool has
// it. The store claims each key on a connection of its own (Acquire): a
// [Transactional] request keeps it, to begin the transaction in the claim's
// round trip and commit it in the stored response's; a [Leased] claim gives
// it back before the handler runs. The lease's later statements and the
// sweep use Exec.
type DB interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

var _ DB = (*pgxpool.Pool)(nil)

// PostgresStore keeps idempotency records in the idem_records table that
// [Migrate] creates, in the schema the pool's search_path selects. Two
// middleware instances on two pools (two server nodes) over one database
// share its records. Claims of one key exclude each other with
// transaction-level advisory locks in the two-int4 key space
// (pg_advisory_xact_lock(int, int), keyed by the scope's hash), apart from
// the bigint advisory locks that applications and migration tools mostly
// use; should an application's two-int4 lock share a key, a claim only
// waits for it. [Transactional] claims prepare their statements by name
// (idem_ and a digest of the SQL) on each connection, whatever the pool's
// DefaultQueryExecMode, so a pool behind PgBouncer in transaction mode needs
// its prepared-statement support (max_prepared_statements), and they go
// to the connection below pgx, so pgx's tracers (QueryTracer, BatchTracer)
// see them only when they are prepared; [Hooks] report every claim and
// commit. It is safe for concurrent use.
type PostgresStore struct {
	db    DB
	local localclaim.Set
	// clock is added to the database's statement_timestamp(); tests move
	// time with it. Nil means zero.
	clock func() time.Duration
	// now is the local clock of the wait bound; nil means time.Now.
	now func() time.Time
}

// NewPostgresStore returns a store on db, which must hold the schema of
// [Migrate].
func NewPostgresStore(db DB) *PostgresStore {
	return &PostgresStore{db: db}
}

// maxClaimRounds bounds the re-reads of a record that changes under a claim.
const maxClaimRounds = 4

// finishTimeout bounds the commit or rollback of an attempt, which runs
// even when the client has gone: the handler's work is done.
const finishTimeout = 10 * time.Second

// timeNow is the local time, by which a claim spends its wait bound.
func (s *PostgresStore) timeNow() time.Time {
	if s.now == nil {
		return time.Now()
	}
	return s.now()
}

func (s *PostgresStore) offset() time.Duration {
	if s.clock == nil {
		return 0
	}
	return s.clock()
}

// Claim claims c's key: in a transaction that the handler shares
// ([Transactional]), or in statements that commit on their own ([Leased]).
func (s *PostgresStore) Claim(ctx context.Context, c *Claim) (ClaimResult, error) {
	var res ClaimResult
	var err error
	if c.Mode == Leased {
		res, err = s.claimLeased(ctx, c)
	} else {
		res, err = s.claimTx(ctx, c)
	}
	// A duplicate that waited its bound for the key's lock (lock_timeout:
	// the first request's transaction is still open), or for a connection
	// while an attempt of the key runs on this node, is in flight.
	pgErr := (*pgconn.PgError)(nil)
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" || errors.Is(err, errPoolBusy) && s.local.Has(c.Scope) {
		res = inFlight(0)
		res.Waited = true
		return res, nil
	}
	// 22021: a byte sequence the database's encoding refuses (not UTF-8,
	// or a NUL), in the scope's text columns.
	if errors.As(err, &pgErr) && pgErr.Code == "22021" {
		return res, fmt.Errorf("%w: %s", ErrUnstorableScope, pgErr.Message)
	}
	return res, err
}

// claimLeased claims the key in statements that commit on their own, so
// the lease is durable before the handler runs. They run on one pool
// connection, which the claim waits for, and gives back before the handler
// runs. As in a [Transactional] claim, the wait bound covers the wait for
// the connection and for the scope's lock together: the statements wait
// for the lock at most what the pool wait left.
func (s *PostgresStore) claimLeased(ctx context.Context, c *Claim) (ClaimResult, error) {
	deadline := s.timeNow().Add(c.Wait)
	conn, err := s.acquire(ctx, c.Wait)
	if err != nil {
		return ClaimResult{}, err
	}
	defer conn.Release()
	if c.Wait > 0 {
		left := *c
		left.Wait = max(deadline.Sub(s.timeNow()), time.Millisecond)
		c = &left
	}
	token := uuid.New()
	inserted, err := s.insert(ctx, conn, c, token)
	if err != nil {
		return ClaimResult{}, err
	}
	res, g, err := s.settle(ctx, conn, c, token, inserted)
	if err != nil || res.Verdict != VerdictClaimed {
		return res, err
	}
	res.Attempt = &leasedAttempt{fence: pgFence{s: s, scope: c.Scope, token: token}, g: g}
	return res, nil
}

// endTx rolls back what of the connection's transaction did not commit,
// and frees the connection. After a rollback that failed the connection is
// not idle, and the pool destroys it on release, which rolls back too.
func endTx(ctx context.Context, conn *pgxpool.Conn) error {
	var err error
	if pc := conn.Conn().PgConn(); !pc.IsClosed() && pc.TxStatus() != 'I' {
		ctx, cancel := detached(ctx)
		_, err = pc.Exec(ctx, "rollback").ReadAll()
		cancel()
	}
	conn.Release()
	return err
}

// querier is a claim's connection ([Leased]) or transaction ([Transactional]).
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// settle turns a [Leased] claim that did not insert into a verdict: it reads
// the record, and reclaims an expired one or takes over an expired lease,
// or claims again when the record vanished. Every statement commits on its
// own.
func (s *PostgresStore) settle(ctx context.Context, q querier, c *Claim, token uuid.UUID, inserted bool) (ClaimResult, grant, error) {
	for range maxClaimRounds {
		if inserted {
			return ClaimResult{Verdict: VerdictClaimed}, grant{attempt: 1}, nil
		}
		f, err := s.read(ctx, q, c)
		if err != nil {
			return ClaimResult{}, grant{}, err
		}
		if f == nil { // swept since the INSERT saw it
			if inserted, err = s.insert(ctx, q, c, token); err != nil {
				return ClaimResult{}, grant{}, err
			}
			continue
		}
		v := decide(f, c)
		if v != vReclaim && v != vTakeover {
			return f.result(v), grant{}, nil
		}
		g, won, err := s.steal(ctx, q, c, token, f, v)
		if err != nil {
			return ClaimResult{}, grant{}, err
		}
		if won {
			return ClaimResult{Verdict: VerdictClaimed}, g, nil
		}
	}
	if inserted { // the last round's insert won: the record is this claim's
		return ClaimResult{Verdict: VerdictClaimed}, grant{attempt: 1}, nil
	}
	return ClaimResult{}, grant{}, errClaimContention
}

// steal reclaims an expired record or takes over an expired lease; won is
// false when another request got there first. q is the claim's connection
// ([Leased]) or the claim's transaction, which holds the scope's lock
// ([Transactional]).
func (s *PostgresStore) steal(ctx context.Context, q querier, c *Claim, token uuid.UUID, f *found, v Verdict) (grant, bool, error) {
	var row pgx.Row
	start := trace.Begin()
	if v == vReclaim {
		row = q.QueryRow(ctx, sqlReclaim, s.claimValues(c, token)...)
	} else {
		lockA, lockB := c.lockKeys()
		row = q.QueryRow(ctx, takeoverSQL(), c.Scope[:], [16]byte(token), leaseArg(c), s.offset(), [16]byte(f.token),
			boundArg(c), lockA, lockB, c.Retention)
	}
	var g grant
	var point *string
	var data []byte
	err := row.Scan(&g.attempt, &point, &data)
	s.traceClaim(c, stealOp(v), f.token, token, err == nil, start, err)
	if errors.Is(err, pgx.ErrNoRows) {
		return grant{}, false, nil
	}
	if err != nil {
		return grant{}, false, err
	}
	if v == vTakeover {
		g.recovery = &Recovery{Data: data}
		if point != nil {
			g.recovery.Point = *point
		}
	}
	return g, true, nil
}

// leaseArg is the lease length of a claim: NULL in [Transactional] mode,
// whose running records no other request ever sees (they commit done).
func leaseArg(c *Claim) any {
	if c.Mode != Leased {
		return nil
	}
	return c.Lease
}

// boundArg is the wait bound of a claim statement's lock: NULL in
// [Transactional] mode, whose reclaims and takeovers hold the lock already.
func boundArg(c *Claim) any {
	if c.Mode != Leased {
		return nil
	}
	return lockTimeout(c.Wait)
}

// claimValues are the arguments of sqlInsert and sqlReclaim. Tokens go as
// [16]byte, which pgx encodes in binary, rather than through uuid.UUID's
// driver.Valuer text form.
func (s *PostgresStore) claimValues(c *Claim, token uuid.UUID) []any {
	lockA, lockB := c.lockKeys()
	return []any{c.Scope[:], c.Tenant, c.Principal, c.Route, c.Key, c.DigestAlg, c.Digest,
		[16]byte(token), leaseArg(c), c.Retention, s.offset(), boundArg(c), lockA, lockB, c.Request}
}

// lockKeys are the keys of the scope's advisory lock: the first eight
// bytes of the scope hash.
func (c *Claim) lockKeys() (int32, int32) {
	return int32(binary.BigEndian.Uint32(c.Scope[0:4])), int32(binary.BigEndian.Uint32(c.Scope[4:8]))
}

// lockTimeout renders a wait bound for lock_timeout, where 0 would mean
// "wait forever".
func lockTimeout(wait time.Duration) string {
	return fmt.Sprintf("%dms", max(wait.Milliseconds(), 1))
}

// Sweep deletes at most limit records whose retention has passed, oldest
// first, in one statement that skips records a request holds.
func (s *PostgresStore) Sweep(ctx context.Context, limit int) (int, error) {
	if trace.On() {
		return s.sweepTraced(ctx, limit)
	}
	tag, err := s.db.Exec(ctx, sqlSweep, limit, s.offset())
	if err != nil {
		return 0, fmt.Errorf("server: sweep: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
