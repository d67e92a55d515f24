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
)

// DB is what PostgresStore needs of a connection pool; *pgxpool.Pool has
// it. The store claims each key on a connection of its own (Acquire): a
// Transactional request keeps it, to begin the transaction in the claim's
// round trip and commit it in the stored response's; a Leased claim gives
// it back before the handler runs. The lease's later statements and the
// sweep use Exec.
type DB interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

var _ DB = (*pgxpool.Pool)(nil)

// PostgresStore keeps idempotency records in the idem_records table that
// Migrate creates, in the schema the pool's search_path selects. Two
// middleware instances on two pools (two server nodes) over one database
// share its records. Claims of one key exclude each other with
// transaction-level advisory locks in the two-int4 key space
// (pg_advisory_xact_lock(int, int), keyed by the scope's hash), apart from
// the bigint advisory locks that applications and migration tools mostly
// use; should an application's two-int4 lock share a key, a claim only
// waits for it. Transactional claims prepare their statements by name
// (idem_ and a digest of the SQL) on each connection, whatever the pool's
// DefaultQueryExecMode, so a pool behind PgBouncer in transaction mode needs
// its prepared-statement support (max_prepared_statements), and they go
// to the connection below pgx, so pgx's tracers (QueryTracer, BatchTracer)
// see them only when they are prepared; Hooks report every claim and
// commit. It is safe for concurrent use.
type PostgresStore struct {
	db    DB
	local localClaims
	// clock is added to the database's statement_timestamp(); tests move
	// time with it. Nil means zero.
	clock func() time.Duration
	// now is the local clock of the wait bound; nil means time.Now.
	now func() time.Time
}

// NewPostgresStore returns a store on db, which must hold the schema of
// Migrate.
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

func (s *PostgresStore) claim(ctx context.Context, c *claimArgs) (claimResult, error) {
	var res claimResult
	var err error
	if c.mode == Leased {
		res, err = s.claimLeased(ctx, c)
	} else {
		res, err = s.claimTx(ctx, c)
	}
	// A duplicate that waited its bound for the key's lock (lock_timeout:
	// the first request's transaction is still open), or for a connection
	// while an attempt of the key runs on this node, is in flight.
	pgErr := (*pgconn.PgError)(nil)
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" || errors.Is(err, errPoolBusy) && s.local.has(c.scope) {
		res = inFlight(0)
		res.waited = true
		return res, nil
	}
	return res, err
}

// claimLeased claims the key in statements that commit on their own, so
// the lease is durable before the handler runs. They run on one pool
// connection, which the claim waits for, and gives back before the handler
// runs. As in a Transactional claim, the wait bound covers the wait for
// the connection and for the scope's lock together: the statements wait
// for the lock at most what the pool wait left.
func (s *PostgresStore) claimLeased(ctx context.Context, c *claimArgs) (claimResult, error) {
	deadline := s.timeNow().Add(c.wait)
	conn, err := s.acquire(ctx, c.wait)
	if err != nil {
		return claimResult{}, err
	}
	defer conn.Release()
	if c.wait > 0 {
		left := *c
		left.wait = max(deadline.Sub(s.timeNow()), time.Millisecond)
		c = &left
	}
	token := uuid.New()
	inserted, err := s.insert(ctx, conn, c, token)
	if err != nil {
		return claimResult{}, err
	}
	res, g, err := s.settle(ctx, conn, c, token, inserted)
	if err != nil || res.verdict != vClaimed {
		return res, err
	}
	res.att = newLeaseAttempt(pgFence{s: s, scope: c.scope, token: token}, g, c.lease)
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

// querier is a claim's connection (Leased) or transaction (Transactional).
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// grant is what a won claim learned.
type grant struct {
	attempt  int
	recovery *Recovery
}

// settle turns a Leased claim that did not insert into a verdict: it reads
// the record, and reclaims an expired one or takes over an expired lease,
// or claims again when the record vanished. Every statement commits on its
// own.
func (s *PostgresStore) settle(ctx context.Context, q querier, c *claimArgs, token uuid.UUID, inserted bool) (claimResult, grant, error) {
	for range maxClaimRounds {
		if inserted {
			return claimResult{verdict: vClaimed}, grant{attempt: 1}, nil
		}
		f, err := s.read(ctx, q, c)
		if err != nil {
			return claimResult{}, grant{}, err
		}
		if f == nil { // swept since the INSERT saw it
			if inserted, err = s.insert(ctx, q, c, token); err != nil {
				return claimResult{}, grant{}, err
			}
			continue
		}
		v := decide(f, c)
		if v != vReclaim && v != vTakeover {
			return f.result(v), grant{}, nil
		}
		g, won, err := s.steal(ctx, q, c, token, f, v)
		if err != nil {
			return claimResult{}, grant{}, err
		}
		if won {
			return claimResult{verdict: vClaimed}, g, nil
		}
	}
	if inserted { // the last round's insert won: the record is this claim's
		return claimResult{verdict: vClaimed}, grant{attempt: 1}, nil
	}
	return claimResult{}, grant{}, errClaimContention
}

// steal reclaims an expired record or takes over an expired lease; won is
// false when another request got there first. q is the claim's connection (Leased) or
// the claim's transaction, which holds the scope's lock (Transactional).
func (s *PostgresStore) steal(ctx context.Context, q querier, c *claimArgs, token uuid.UUID, f *found, v verdict) (grant, bool, error) {
	var row pgx.Row
	if v == vReclaim {
		row = q.QueryRow(ctx, sqlReclaim, s.claimValues(c, token)...)
	} else {
		lockA, lockB := c.lockKeys()
		row = q.QueryRow(ctx, sqlTakeover, c.scope[:], [16]byte(token), leaseArg(c), s.offset(), [16]byte(f.token),
			boundArg(c), lockA, lockB, c.retention)
	}
	var g grant
	var point *string
	var data []byte
	err := row.Scan(&g.attempt, &point, &data)
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

// leaseArg is the lease length of a claim: NULL in Transactional mode,
// whose running records no other request ever sees (they commit done).
func leaseArg(c *claimArgs) any {
	if c.mode != Leased {
		return nil
	}
	return c.lease
}

// boundArg is the wait bound of a claim statement's lock: NULL in
// Transactional mode, whose reclaims and takeovers hold the lock already.
func boundArg(c *claimArgs) any {
	if c.mode != Leased {
		return nil
	}
	return lockTimeout(c.wait)
}

// claimValues are the arguments of sqlInsert and sqlReclaim. Tokens go as
// [16]byte, which pgx encodes in binary, rather than through uuid.UUID's
// driver.Valuer text form.
func (s *PostgresStore) claimValues(c *claimArgs, token uuid.UUID) []any {
	lockA, lockB := c.lockKeys()
	return []any{c.scope[:], c.tenant, c.principal, c.route, c.key, fingerprintAlg, c.fp,
		[16]byte(token), leaseArg(c), c.retention, s.offset(), boundArg(c), lockA, lockB, c.request}
}

// lockKeys are the keys of the scope's advisory lock: the first eight
// bytes of the scope hash.
func (c *claimArgs) lockKeys() (int32, int32) {
	return int32(binary.BigEndian.Uint32(c.scope[0:4])), int32(binary.BigEndian.Uint32(c.scope[4:8]))
}

// lockTimeout renders a wait bound for lock_timeout, where 0 would mean
// "wait forever".
func lockTimeout(wait time.Duration) string {
	return fmt.Sprintf("%dms", max(wait.Milliseconds(), 1))
}

// Sweep deletes at most limit records whose retention has passed, oldest
// first, in one statement that skips records a request holds.
func (s *PostgresStore) Sweep(ctx context.Context, limit int) (int, error) {
	tag, err := s.db.Exec(ctx, sqlSweep, limit, s.offset())
	if err != nil {
		return 0, fmt.Errorf("server: sweep: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
