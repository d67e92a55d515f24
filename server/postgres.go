package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is what PostgresStore needs of a connection pool; *pgxpool.Pool has
// it. The store runs each Transactional request on a connection of its own
// (Acquire) so that it can begin the transaction in the claim's round trip
// and commit it in the stored response's.
type DB interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// PostgresStore keeps idempotency records in the idem_records table that
// Migrate creates, in the schema the pool's search_path selects. Two
// middleware instances on two pools (two server nodes) over one database
// share its records. It is safe for concurrent use.
type PostgresStore struct {
	db DB
	// clock is added to the database's statement_timestamp(); tests move
	// time with it. Nil means zero.
	clock func() time.Duration
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
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return inFlight(0), nil // lock_timeout: the first request's transaction is still open
	}
	return res, err
}

// claimTx begins the transaction and claims the key in one round trip; the
// transaction stays open for the handler when the claim is won.
func (s *PostgresStore) claimTx(ctx context.Context, c *claimArgs) (claimResult, error) {
	conn, err := s.db.Acquire(ctx)
	if err != nil {
		return claimResult{}, err
	}
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	token := uuid.New()
	s.queueRound(b, c, token)
	br := conn.SendBatch(ctx, b)
	tx := br.Tx()
	_, err = br.Exec() // BEGIN
	var r round
	if err == nil {
		r, err = readRound(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	var res claimResult
	var g grant
	if err == nil {
		res, g, err = s.settle(ctx, tx, c, token, r)
	}
	if err != nil || res.verdict != vClaimed {
		endTx(ctx, conn, tx)
		return res, err
	}
	res.att = newTxAttempt(s, conn, tx, c.scope, token, g.attempt)
	return res, nil
}

// claimLeased claims the key in a transaction of its own, which commits the
// lease before the handler runs.
func (s *PostgresStore) claimLeased(ctx context.Context, c *claimArgs) (claimResult, error) {
	token := uuid.New()
	r, err := s.round(ctx, s.db, c, token)
	if err != nil {
		return claimResult{}, err
	}
	res, g, err := s.settle(ctx, s.db, c, token, r)
	if err != nil || res.verdict != vClaimed {
		return res, err
	}
	res.att = newLeaseAttempt(pgFence{s: s, scope: c.scope, token: token}, g, c.lease)
	return res, nil
}

// endTx rolls back a transaction that claimed nothing, and frees its
// connection.
func endTx(ctx context.Context, conn *pgxpool.Conn, tx pgx.Tx) {
	if tx != nil && !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		_ = tx.Rollback(ctx) // on failure pgx closes the connection, which rolls back
		cancel()
	}
	conn.Release()
}

// sender is a pool, a connection or a transaction.
type sender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// grant is what a won claim learned.
type grant struct {
	attempt  int
	recovery *Recovery
}

// settle turns the result of a claim round into a verdict, reclaiming an
// expired record or taking over an expired lease, and looking again when
// the record changed under it.
func (s *PostgresStore) settle(ctx context.Context, q sender, c *claimArgs, token uuid.UUID, r round) (claimResult, grant, error) {
	for range maxClaimRounds {
		if r.inserted {
			return claimResult{verdict: vClaimed}, grant{attempt: 1}, nil
		}
		if r.found != nil {
			g, won, err := s.steal(ctx, q, c, token, r.found)
			if err != nil {
				return claimResult{}, grant{}, err
			}
			if won {
				return claimResult{verdict: vClaimed}, g, nil
			}
			if v := decide(r.found, c); v != vReclaim && v != vTakeover {
				return r.found.result(v), grant{}, nil
			}
		}
		var err error
		if r, err = s.round(ctx, q, c, token); err != nil {
			return claimResult{}, grant{}, err
		}
	}
	return claimResult{}, grant{}, errClaimContention
}

// steal reclaims an expired record or takes over an expired lease, when
// decide says so; won is false when another request got there first.
func (s *PostgresStore) steal(ctx context.Context, q sender, c *claimArgs, token uuid.UUID, f *found) (g grant, won bool, err error) {
	switch decide(f, c) {
	case vReclaim:
		err = s.bounded(ctx, q, c.wait, func(row pgx.Row) error { return row.Scan(&won) },
			sqlReclaim, s.claimValues(c, token)...)
		return grant{attempt: 1}, won, noRows(err)
	case vTakeover:
		var point *string
		var data []byte
		scan := func(row pgx.Row) error {
			err := row.Scan(&g.attempt, &point, &data)
			won = err == nil
			return err
		}
		err = s.bounded(ctx, q, c.wait, scan, sqlTakeover, c.scope[:], token, leaseArg(c), s.offset(), f.token)
		g.recovery = &Recovery{Data: data}
		if point != nil {
			g.recovery.Point = *point
		}
		return g, won, noRows(err)
	}
	return grant{}, false, nil
}

func noRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// leaseArg is the lease length of a claim: NULL in Transactional mode,
// whose records are never seen running by others.
func leaseArg(c *claimArgs) any {
	if c.mode != Leased {
		return nil
	}
	return c.lease
}

func (s *PostgresStore) claimValues(c *claimArgs, token uuid.UUID) []any {
	return []any{c.scope[:], c.tenant, c.principal, c.route, c.key, fingerprintAlg, c.fp,
		token, leaseArg(c), c.retention, s.offset()}
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
