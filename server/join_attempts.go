package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The two sides of StoreInTx in this package's stores: the claim's
// transaction holds the scope's lock, the app's writes the record
// (sqlInsertRecord), and the claim ends by rolling its transaction back and
// looking for the record, which the app's commit made visible.

func (a *pgTxAttempt) joinRecord(ctx context.Context, exec execFunc, res *Response) error {
	if !a.fresh {
		if err := a.clearStale(ctx); err != nil {
			return err
		}
	}
	return insertJoined(ctx, exec, a.c, a.token.String(), a.s.offset(), res)
}

// clearStale deletes the record that the claim reclaimed or took over,
// which its transaction holds locked, commits, and takes the scope's lock
// again in a new transaction, in one round trip: the app's transaction can
// then insert the record. Should another claim take the lock in between, it
// finds no record and runs too, but only one of the two records can commit
// (the primary key), and the other's transaction, its effects with it,
// fails.
func (a *pgTxAttempt) clearStale(ctx context.Context) error {
	if err := clearStale(ctx, a.conn.Conn(), a.c, a.token); err != nil {
		return err
	}
	a.fresh = true
	return nil
}

// clearStale runs the statements of a clearStale on conn.
func clearStale(ctx context.Context, conn *pgx.Conn, c *Claim, token uuid.UUID) error {
	lockA, lockB := c.lockKeys()
	b := &pgx.Batch{}
	b.Queue(sqlClearStale, c.Scope[:], [16]byte(token))
	b.Queue("commit")
	b.Queue("begin")
	b.Queue(sqlTryLock, lockA, lockB)
	return conn.SendBatch(ctx, b).Close()
}

func (a *pgTxAttempt) endJoined(ctx context.Context) (bool, error) {
	_ = a.guard.close()
	conn := a.conn.Conn()
	var err error
	if conn.PgConn().TxStatus() != 'I' {
		_, err = conn.Exec(ctx, "rollback")
	}
	ok := false
	if err == nil {
		err = conn.QueryRow(ctx, sqlJoined, a.c.Scope[:], [16]byte(a.token)).Scan(&ok)
	}
	a.conn.Release() // the pool destroys it unless idle
	a.s.local.Remove(a.c.Scope)
	return ok, err
}

func (a *sqlTxAttempt) joinRecord(ctx context.Context, exec execFunc, res *Response) error {
	if !a.fresh {
		if err := a.clearStale(ctx); err != nil {
			return err
		}
	}
	return insertJoined(ctx, exec, a.c, a.token.String(), a.s.pg.offset(), res)
}

// clearStale is pgTxAttempt's, on the connection under the *sql.Tx, which
// stays the handler's [SQLTx] (on the new transaction).
func (a *sqlTxAttempt) clearStale(ctx context.Context) error {
	err := raw(a.conn, func(pc *pgx.Conn) error { return clearStale(ctx, pc, a.c, a.token) })
	if err == nil {
		a.fresh = true
	}
	return err
}

func (a *sqlTxAttempt) endJoined(ctx context.Context) (bool, error) {
	err := a.tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		err = nil
	}
	ok := false
	if err == nil {
		err = a.conn.QueryRowContext(ctx, sqlJoined, a.c.Scope[:], [16]byte(a.token)).Scan(&ok)
	}
	a.end()
	return ok, err
}

// insertJoined writes the record in the app's transaction.
func insertJoined(ctx context.Context, exec execFunc, c *Claim, token string, offset time.Duration, res *Response) error {
	n, err := exec(ctx, sqlInsertRecord, recordArgs(c, token, offset, res)...)
	if err == nil && n != 1 {
		err = fmt.Errorf("the record was not written (%d rows)", n)
	}
	return err
}
