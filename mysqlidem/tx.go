package mysqlidem

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// errLockWait is the error of a Transactional claim that waited its bound
// for the running attempt of its key (1205), or kept meeting deadlocks
// (1213) until the bound passed: the middleware answers in flight.
var errLockWait = errors.New("mysqlidem: the key's running attempt outlasted the wait bound")

// errPoolBusy is returned by a claim that got no connection within the
// wait bound.
var errPoolBusy = errors.New("mysqlidem: no database connection free within the wait bound")

// MySQL's error numbers that a claim handles.
const (
	erLockWaitTimeout = 1205
	erLockDeadlock    = 1213
	erConnKilled      = 1927 // MariaDB: the session was killed
)

// maxDeadlockRounds bounds the claims begun again after a deadlock.
const maxDeadlockRounds = 16

// claimTx claims c's key in a transaction that the handler then shares,
// begun again after a deadlock (InnoDB rolled it back) while the wait
// bound lasts. Deadlocks between duplicates arise only when a claim that
// inserted a new key rolls back while two or more wait for it: each
// waiter then retries its insert into the gap the row left.
func (s *Store) claimTx(ctx context.Context, c *server.Claim) (server.ClaimResult, error) {
	deadline := s.timeNow().Add(c.Wait)
	for range maxDeadlockRounds {
		res, err := s.claimTxOnce(ctx, c, deadline)
		if !isMySQLErr(err, erLockDeadlock) {
			return res, err
		}
		if !s.timeNow().Before(deadline) {
			return server.ClaimResult{}, fmt.Errorf("%w: %w", errLockWait, err)
		}
	}
	return server.ClaimResult{}, errClaimContention
}

// claimTxOnce begins the transaction on a connection of its own, locks
// the key's row (inserting it for a new key: sqlClaimTx), reads it, and
// settles the claim. The transaction lives past the request's
// cancellation and ends in Complete or Abort.
func (s *Store) claimTxOnce(ctx context.Context, c *server.Claim, deadline time.Time) (server.ClaimResult, error) {
	conn, err := s.conn(ctx, c.Wait > 0, deadline.Sub(s.timeNow()))
	if err != nil {
		return server.ClaimResult{}, err
	}
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		_ = conn.Close()
		return server.ClaimResult{}, wrap("claim", err)
	}
	token, began := uuid.New(), trace.Begin()
	res, g, err := s.settleTx(ctx, conn, tx, c, token, deadline)
	if err != nil || res.Verdict != server.VerdictClaimed {
		_ = tx.Rollback()
		_ = conn.Close()
		return res, err
	}
	s.local.Add(c.Scope)
	res.Attempt = &txAttempt{s: s, conn: conn, tx: tx, c: c, token: token, n: g.attempt, fresh: g.inserted, began: began}
	return res, nil
}

// settleTx locks and reads the key's row in tx and judges it: a new key
// (the row this claim inserted), a record that answers, or one to reclaim
// or take over under the lock.
func (s *Store) settleTx(ctx context.Context, conn *sql.Conn, tx *sql.Tx, c *server.Claim, token uuid.UUID, deadline time.Time) (server.ClaimResult, grant, error) {
	if err := s.lockRow(ctx, conn, tx, c, token, deadline.Sub(s.timeNow())); err != nil {
		if isMySQLErr(err, erLockWaitTimeout) {
			return server.ClaimResult{}, grant{}, fmt.Errorf("%w: %w", errLockWait, err)
		}
		return server.ClaimResult{}, grant{}, err
	}
	start := trace.Begin()
	f, err := s.read(ctx, tx, sqlReadLocked, c)
	switch {
	case err != nil:
		return server.ClaimResult{}, grant{}, wrap("claim", err)
	case f == nil:
		return server.ClaimResult{}, grant{}, errClaimContention
	case f.token == token:
		return server.ClaimResult{Verdict: server.VerdictClaimed}, grant{attempt: 1, inserted: true}, nil
	}
	s.traceRead(c, f, start) // a committed row, read under its lock
	v, res := f.decide(c)
	if v == vFinal {
		return res, grant{}, nil
	}
	g, won, err := s.steal(ctx, tx, c, f, v, token)
	if err == nil && !won {
		err = errClaimContention // the row is locked: nothing else could change it
	}
	if err != nil {
		return server.ClaimResult{}, grant{}, wrap("claim", err)
	}
	return server.ClaimResult{Verdict: server.VerdictClaimed}, g, nil
}

// lockRow runs sqlClaimTx with its lock wait bounded by wait, in whole
// seconds as InnoDB counts them (rounded up; a bound under a second waits
// one on MySQL, whose least innodb_lock_wait_timeout is 1). On MariaDB
// the bound is the statement's own (SET STATEMENT ... FOR); on MySQL the
// session's, set before and put back after, so that the handler runs
// with the session's own setting.
func (s *Store) lockRow(ctx context.Context, conn *sql.Conn, tx *sql.Tx, c *server.Claim, token uuid.UUID, wait time.Duration) error {
	secs := int64(math.Ceil(max(wait, 0).Seconds()))
	if s.isMariaDB(ctx, tx) {
		_, err := tx.ExecContext(ctx, fmt.Sprintf("SET STATEMENT innodb_lock_wait_timeout=%d FOR ", secs)+sqlClaimTx,
			s.claimArgs(c, token)...)
		return err
	}
	set := fmt.Sprintf("SET @idem_lwt = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = %d", max(secs, 1))
	if _, err := tx.ExecContext(ctx, set); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, sqlClaimTx, s.claimArgs(c, token)...)
	if _, rerr := tx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = @idem_lwt"); err == nil {
		err = rerr
	}
	return err
}

// conn takes a connection of db, waiting at most wait when bound (the
// request's context bounds the wait too): errPoolBusy past it.
func (s *Store) conn(ctx context.Context, bound bool, wait time.Duration) (*sql.Conn, error) {
	if !bound {
		conn, err := s.db.Conn(ctx)
		return conn, wrap("claim", err)
	}
	bounded, cancel := context.WithTimeout(ctx, max(wait, time.Millisecond))
	defer cancel()
	conn, err := s.db.Conn(bounded)
	if err != nil && ctx.Err() == nil && bounded.Err() != nil {
		return nil, fmt.Errorf("%w: %w", errPoolBusy, err)
	}
	return conn, wrap("claim", err)
}

// isMySQLErr reports whether err is the server's error number.
func isMySQLErr(err error, number uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}

// lost marks an error that says the connection was lost (the driver's
// invalid connection, a killed session) as driver.ErrBadConn, which the
// middleware answers with 503 and Retry-After.
func lost(err error) error {
	if errors.Is(err, mysql.ErrInvalidConn) || isMySQLErr(err, erConnKilled) {
		return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
	}
	return err
}

// txAttempt is a Transactional claim: an open *sql.Tx on a connection of
// its own, which holds the key's row lock and which the handler shares.
type txAttempt struct {
	s     *Store
	conn  *sql.Conn
	tx    *sql.Tx
	c     *server.Claim
	token uuid.UUID
	n     int
	fresh bool      // a new key: the claim inserted the row
	began time.Time // when the claim began (trace.Begin)
}

func (a *txAttempt) Number() int { return a.n }

// Tx returns the handler's *sql.Tx, which [server.SQLTx] hands it.
func (a *txAttempt) Tx() any { return a.tx }

// Complete writes the record and commits. Any failure is an error (the
// handler ended the transaction: [server.ErrTxEnded]): the caller must not
// send the handler's response.
func (a *txAttempt) Complete(ctx context.Context, res *server.Response) error {
	start := trace.Begin()
	err := a.store(ctx, res)
	if err == nil {
		err = a.tx.Commit()
		a.traceCommit(res, start, err)
	} else {
		a.traceCommit(res, start, err)
		_ = a.tx.Rollback()
		a.clearEnded(ctx)
	}
	a.end()
	if err != nil {
		return fmt.Errorf("mysqlidem: commit: %w", lost(err))
	}
	return nil
}

// store writes the record in the transaction, which it must find open.
func (a *txAttempt) store(ctx context.Context, res *server.Response) error {
	stored, _ := res.MarshalBinary() // never fails
	query := sqlCompleteTx
	if !a.s.mariaDB { // MySQL has no @@in_transaction: see the package doc
		query = sqlComplete
	}
	r, err := a.tx.ExecContext(ctx, query, state(res), status(res), stored, a.c.Scope[:], a.token[:])
	if errors.Is(err, sql.ErrTxDone) {
		return server.ErrTxEnded
	}
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w (the record was not written: %d rows, %v)", server.ErrTxEnded, n, err)
	}
	return nil
}

// Abort rolls the transaction back: claim and effects vanish together.
func (a *txAttempt) Abort(ctx context.Context, reject bool) error {
	err := a.tx.Rollback()
	a.clearEnded(ctx)
	a.end()
	if err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("mysqlidem: rollback: %w", lost(err))
	}
	return nil
}

// clearEnded deletes, after the rollback, the claim's running row when a
// handler that ended the transaction itself (COMMIT) committed it: the
// key is then free, as after any rollback, rather than held by a running
// row with no lease that the next claim would have to take over. It
// deletes nothing when the transaction rolled back (the row is gone) or
// committed done, and costs a statement on failures only.
func (a *txAttempt) clearEnded(ctx context.Context) {
	start := trace.Begin()
	r, err := a.conn.ExecContext(ctx, sqlClearEnded, a.c.Scope[:], a.token[:])
	if err != nil || !trace.On() {
		return
	}
	if n, _ := r.RowsAffected(); n == 1 {
		a.traceEnded(start)
	}
}

// end gives the connection back to db and the scope up on this node.
func (a *txAttempt) end() {
	_ = a.conn.Close()
	a.s.local.Remove(a.c.Scope)
}
