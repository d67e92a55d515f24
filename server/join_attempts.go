package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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
	lockA, lockB := a.c.lockKeys()
	b := &pgx.Batch{}
	b.Queue(sqlClearStale, a.c.Scope[:], [16]byte(a.token))
	b.Queue("commit")
	b.Queue("begin")
	b.Queue(sqlTryLock, lockA, lockB)
	if err := a.conn.Conn().SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	a.fresh = true
	return nil
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
	a.s.local.remove(a.c.Scope)
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

// clearStale is pgTxAttempt's, on the *sql.Tx: the handler's [SQLTx] is
// the new transaction from then on.
func (a *sqlTxAttempt) clearStale(ctx context.Context) error {
	if _, err := a.tx.ExecContext(ctx, sqlClearStale, a.c.Scope[:], [16]byte(a.token)); err != nil {
		return err
	}
	if err := a.tx.Commit(); err != nil {
		return err
	}
	tx, err := a.conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return err
	}
	a.tx, a.fresh = tx, true
	lockA, lockB := a.c.lockKeys()
	return raw(a.conn, func(pc *pgx.Conn) error {
		_, err := pc.Exec(ctx, sqlTryLock, lockA, lockB)
		return err
	})
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
