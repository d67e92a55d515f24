package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// claimTx begins the transaction through database/sql, then tries the
// scope's lock and reads the record in one round trip on the pgx
// connection under it, and settles the claim by PostgresStore's rules
// (settleTx). The transaction stays open for the handler when the claim is
// won. It lives past the request's cancellation (the middleware commits
// a finished handler's work even if the client left), and ends in
// Complete or Abort, which the middleware always calls.
func (s *PostgresSQLStore) claimTx(ctx context.Context, c *Claim) (ClaimResult, error) {
	deadline := s.pg.timeNow().Add(c.Wait)
	conn, err := s.conn(ctx, c.Wait)
	if err != nil {
		return ClaimResult{}, err
	}
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		_ = conn.Close()
		return ClaimResult{}, err
	}
	var res ClaimResult
	var won *pgTxAttempt
	err = raw(conn, func(pc *pgx.Conn) error {
		locked, f, err := s.tryLockRead(ctx, pc, c)
		if err == nil {
			res, won, err = s.pg.settleTx(ctx, pc, c, locked, f, deadline)
		}
		return err
	})
	if err != nil || res.Verdict != VerdictClaimed {
		_ = tx.Rollback()
		_ = conn.Close()
		return res, err
	}
	s.local.Add(c.Scope)
	res.Attempt = &sqlTxAttempt{s: s, conn: conn, tx: tx, c: c, token: won.token, n: won.n, fresh: won.fresh}
	return res, nil
}

// tryLockRead tries the scope's lock, marking the transaction as the
// claim's, and reads the record, in one round trip: PostgresStore's
// statements (sqlTryLock, sqlRead) on its wire path (queueClaim), as two
// statements, so that the read sees a record that committed while the lock
// was taken.
func (s *PostgresSQLStore) tryLockRead(ctx context.Context, pc *pgx.Conn, c *Claim) (locked bool, f *found, err error) {
	b := newWireBatch(pc)
	if err = s.pg.queueClaim(ctx, b, c, &locked, &f); err == nil {
		_, err = b.send(ctx)
	}
	return locked, f, err
}

// sqlTxAttempt is a [Transactional] claim of a [PostgresSQLStore]: an open
// *sql.Tx on a connection of its own, which holds the scope's lock and
// which the handler shares.
type sqlTxAttempt struct {
	s     *PostgresSQLStore
	conn  *sql.Conn
	tx    *sql.Tx
	c     *Claim
	token uuid.UUID
	n     int
	fresh bool // a new key: the record is inserted at commit, not updated
}

func (a *sqlTxAttempt) Number() int { return a.n }

// Tx returns the handler's *sql.Tx, which [SQLTx] hands it.
func (a *sqlTxAttempt) Tx() any { return a.tx }

// Complete writes the record and commits. Any failure is an error (the
// handler ended the transaction: [ErrTxEnded]): the caller must not send
// the handler's response, whose effects may not have committed.
func (a *sqlTxAttempt) Complete(ctx context.Context, res *Response) error {
	err := a.ended()
	if err == nil {
		err = a.store(ctx, res)
	}
	if err == nil {
		err = a.tx.Commit()
	} else {
		_ = a.tx.Rollback()
	}
	a.end()
	if err != nil {
		return fmt.Errorf("server: commit: %w", err)
	}
	return nil
}

// Abort rolls the transaction back: claim and effects vanish together.
func (a *sqlTxAttempt) Abort(ctx context.Context, reject bool) error {
	err := a.ended()
	if rerr := a.tx.Rollback(); err == nil && !errors.Is(rerr, sql.ErrTxDone) {
		err = rerr
	}
	a.end()
	if err != nil {
		return fmt.Errorf("server: rollback: %w", err)
	}
	return nil
}

// end gives the connection back to db and the scope up on this node.
func (a *sqlTxAttempt) end() {
	_ = a.conn.Close()
	a.s.local.Remove(a.c.Scope)
}

// ended returns [ErrTxEnded] when the handler ended the transaction: with
// the *sql.Tx's Commit or Rollback, or with SQL, which left the connection
// outside a transaction block by the status the server reported at the end
// of its last command (it costs no round trip). A transaction that one
// call ended and began again ("COMMIT; BEGIN") is caught by the claim's
// mark when the record is written (store).
func (a *sqlTxAttempt) ended() error {
	idle := false
	err := raw(a.conn, func(pc *pgx.Conn) error {
		idle = pc.PgConn().TxStatus() == 'I'
		return nil
	})
	switch {
	case err != nil:
		return err
	case idle:
		return ErrTxEnded
	}
	return nil
}

// store writes the record in the transaction, with PostgresStore's
// statements on its wire path (queueRecord): sqlInsertDone for a new key,
// sqlCompleteTx for a reclaimed or taken-over record. Each writes only in
// a transaction that the claim marked: no row means that the handler ended
// the claim's transaction and began another.
func (a *sqlTxAttempt) store(ctx context.Context, res *Response) error {
	var tags []pgconn.CommandTag
	err := raw(a.conn, func(pc *pgx.Conn) error {
		b := newWireBatch(pc)
		err := queueRecord(ctx, b, a.c, a.token, a.fresh, a.s.pg.offset(), res)
		if err == nil {
			tags, err = b.send(ctx)
		}
		return err
	})
	if err != nil {
		return err
	}
	if n := tags[0].RowsAffected(); n != 1 {
		return fmt.Errorf("%w (the record was not written: %d rows)", ErrTxEnded, n)
	}
	return nil
}
