package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/trace"
)

// errPoolBusy is returned by a claim that got no pool connection within
// the wait bound.
var errPoolBusy = errors.New("server: no database connection free within the wait bound")

// claimTx begins the transaction, tries the scope's lock and reads the
// record in one round trip (begin); the transaction stays open for the
// handler when the claim is won. A new key writes nothing until the commit. The
// wait bound covers the wait for a connection and for the lock together.
func (s *PostgresStore) claimTx(ctx context.Context, c *Claim) (ClaimResult, error) {
	deadline := s.timeNow().Add(c.Wait)
	conn, err := s.acquire(ctx, c.Wait)
	if err != nil {
		return ClaimResult{}, err
	}
	locked, f, err := s.begin(ctx, conn.Conn(), c)
	var res ClaimResult
	var att *pgTxAttempt
	if err == nil {
		res, att, err = s.settleTx(ctx, conn.Conn(), c, locked, f, deadline)
	}
	if err != nil || res.Verdict != VerdictClaimed {
		_ = endTx(ctx, conn)
		return res, err
	}
	att.s, att.conn, att.guard = s, conn, newGuardTx(&connTx{conn: conn.Conn()})
	s.local.Add(c.Scope)
	res.Attempt = att
	return res, nil
}

// acquire takes a pool connection, waiting at most wait when it is
// positive (the request's context bounds the wait too): errPoolBusy past
// it. A request that waits for a connection holds nothing.
func (s *PostgresStore) acquire(ctx context.Context, wait time.Duration) (*pgxpool.Conn, error) {
	if wait <= 0 {
		return s.db.Acquire(ctx)
	}
	bounded, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := s.db.Acquire(bounded)
	if err != nil && ctx.Err() == nil && bounded.Err() != nil {
		return nil, fmt.Errorf("%w: %w", errPoolBusy, err)
	}
	return conn, err
}

// settleTx turns what the first round trip found into a verdict: a record
// that answers the request, or a claim of a new key or of an expired
// record or lease, which needs the scope's lock. Without it, it waits for
// the lock (another claim of the scope is running) and looks again. A
// fencing token is drawn only for a claim: a replay or a refusal needs none.
func (s *PostgresStore) settleTx(ctx context.Context, conn *pgx.Conn, c *Claim, locked bool, f *found, deadline time.Time) (res ClaimResult, att *pgTxAttempt, err error) {
	waited := false
	defer func() { res.Waited = waited }()
	for range maxClaimRounds {
		v := VerdictClaimed // no record: a new key
		if f != nil {
			v = decide(f, c)
		}
		switch {
		case v != VerdictClaimed && v != vReclaim && v != vTakeover:
			return f.result(v), nil, nil
		case !locked:
			waited = true
			if f, err = s.waitAndRead(ctx, conn, c, deadline.Sub(s.timeNow())); err != nil {
				return ClaimResult{}, nil, err
			}
			locked = true
		case v == VerdictClaimed:
			return ClaimResult{Verdict: VerdictClaimed}, &pgTxAttempt{c: c, token: uuid.New(), n: 1, fresh: true}, nil
		default:
			token := uuid.New()
			g, won, err := s.steal(ctx, conn, c, token, f, v)
			if err != nil {
				return ClaimResult{}, nil, err
			}
			if won {
				return ClaimResult{Verdict: VerdictClaimed}, &pgTxAttempt{c: c, token: token, n: g.attempt}, nil
			}
			if f, err = s.read(ctx, conn, c); err != nil { // it changed (swept, or completed by its lease)
				return ClaimResult{}, nil, err
			}
		}
	}
	return ClaimResult{}, nil, errClaimContention
}

// waitAndRead waits for the scope's lock, at most wait (SQLSTATE 55P03
// past it), and reads the record again, in one round trip.
func (s *PostgresStore) waitAndRead(ctx context.Context, conn *pgx.Conn, c *Claim, wait time.Duration) (*found, error) {
	lockA, lockB := c.lockKeys()
	b := &pgx.Batch{}
	b.Queue(sqlWaitLock, lockA, lockB, lockTimeout(wait))
	b.Queue(sqlRead, c.Scope[:], s.offset())
	br := conn.SendBatch(ctx, b)
	_, err := br.Exec()
	var f *found
	if err == nil {
		f, err = scanFound(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return f, err
}

// pgTxAttempt is a [Transactional] claim: an open transaction on a
// connection of its own, which holds the scope's lock and which the
// handler shares through a guardTx.
type pgTxAttempt struct {
	s     *PostgresStore
	conn  *pgxpool.Conn
	guard *guardTx
	c     *Claim
	token uuid.UUID
	n     int
	fresh bool // a new key: the record is inserted at commit, not updated
}

func (a *pgTxAttempt) Number() int { return a.n }

// Tx returns the handler's pgx.Tx, which [Tx] hands it.
func (a *pgTxAttempt) Tx() any { return a.guard }

// complete stores the response and commits in one round trip. Any failure
// (the handler's statements had aborted the transaction, the commit failed,
// the connection broke, a record of the key appeared that no lock
// excluded) is an error: the caller must not send the handler's response,
// whose effects may not have committed.
func (a *pgTxAttempt) Complete(ctx context.Context, res *Response) error {
	err := a.guard.close() // ErrTxEnded: the handler ended the transaction
	if err == nil {
		err = a.store(ctx, res)
	}
	_ = endTx(ctx, a.conn) // rolls back only what did not commit
	a.s.local.Remove(a.c.Scope)
	if err != nil {
		return fmt.Errorf("server: commit: %w", err)
	}
	return nil
}

// abort rolls the transaction back: claim and effects vanish together.
func (a *pgTxAttempt) Abort(ctx context.Context, reject bool) error {
	err := errors.Join(a.guard.close(), endTx(ctx, a.conn))
	a.s.local.Remove(a.c.Scope)
	if err != nil {
		return fmt.Errorf("server: rollback: %w", err)
	}
	return nil
}

// store writes the record and commits, in one round trip.
func (a *pgTxAttempt) store(ctx context.Context, res *Response) error {
	b := newWireBatch(a.conn.Conn())
	if err := queueRecord(ctx, b, a.c, a.token, a.fresh, a.s.offset(), res); err != nil {
		return err
	}
	if err := b.queue(ctx, wireCommit, nil, nil); err != nil {
		return err
	}
	start := trace.Begin()
	tags, err := b.send(ctx)
	if trace.On() {
		a.traceCommit(res, tags, start, err)
	}
	if err != nil {
		return err
	}
	if tags[0].RowsAffected() != 1 {
		return errors.New("the record was not written: the claim's transaction is gone (the handler ended it) or its record is")
	}
	if tags[1].String() != "COMMIT" {
		return fmt.Errorf("commit answered %s", tags[1])
	}
	return nil
}

// queueRecord queues the write of a [Transactional] attempt's record in
// its transaction (which must be the claim's: the statements write only in
// a transaction the claim marked): the insert of a new key's (fresh), or
// the completion of a reclaimed or taken-over one.
func queueRecord(ctx context.Context, b *wireBatch, c *Claim, token uuid.UUID, fresh bool, offset time.Duration, res *Response) error {
	st, p := wireComplete, newWireParams(5).bytes(c.Scope[:]).uuid(token).response(res)
	if fresh {
		st, p = wireInsertDone, insertDoneParams(c, token, offset, res)
	}
	return b.queue(ctx, st, p, nil)
}

// begin begins a transaction on conn, tries the scope's lock and reads the
// record, in one round trip of prepared statements (postgres_wire.go).
// The handler of a won claim gets the transaction as a connTx over conn,
// because pgx builds a Tx of its own only with a BEGIN of its own, a round
// trip more (see connTx).
func (s *PostgresStore) begin(ctx context.Context, conn *pgx.Conn, c *Claim) (locked bool, f *found, err error) {
	b := newWireBatch(conn)
	if err = b.queue(ctx, wireBegin, nil, nil); err != nil {
		return false, nil, err
	}
	if err = s.queueClaim(ctx, b, c, &locked, &f); err != nil {
		return false, nil, err
	}
	_, err = b.send(ctx)
	return locked, f, err
}

// queueClaim queues the claim's statements in a transaction: the try of
// the scope's lock, into locked, and the read of the record, into f.
func (s *PostgresStore) queueClaim(ctx context.Context, b *wireBatch, c *Claim, locked *bool, f **found) error {
	lockA, lockB := c.lockKeys()
	err := b.queue(ctx, wireTryLock, newWireParams(2).int4(int(lockA)).int4(int(lockB)), func(v [][]byte) error {
		*locked = len(v) == 2 && len(v[0]) == 1 && v[0][0] == 1
		return nil
	})
	if err != nil {
		return err
	}
	return b.queue(ctx, wireRead, newWireParams(2).bytes(c.Scope[:]).interval(s.offset()), func(v [][]byte) error {
		r, err := decodeRecordRow(b.conn.TypeMap(), v)
		if err == nil {
			*f, err = r.found()
		}
		return err
	})
}
