package server

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrTxManaged is returned by Commit and Rollback on the transaction that
// Tx gives a handler: the middleware commits or rolls it back by the
// handler's response status (a 5xx or a rejection status rolls back).
var ErrTxManaged = errors.New("server: the idempotency middleware commits or rolls back this transaction")

// guardTx is the pgx.Tx a handler gets, and the savepoints begun from it.
// It forwards to the real transaction until the middleware closes it,
// refuses Commit and Rollback of the transaction itself, and after close
// answers pgx.ErrTxClosed, Conn nil and LargeObjects the zero value, so
// that a handler that kept the Tx or a savepoint cannot reach the
// connection once it went back to the pool. A *pgx.Conn or LargeObjects
// that the handler took while it ran is not guarded: it must not be kept.
// guardTx does not embed pgx.Tx, so that a method pgx adds to the
// interface breaks the build until it is guarded here.
type guardTx struct {
	tx     pgx.Tx
	closed *atomic.Bool // shared by the transaction and its savepoints
	nested bool         // a savepoint: its Commit and Rollback are the handler's
}

var _ pgx.Tx = (*guardTx)(nil)

func newGuardTx(tx pgx.Tx) *guardTx { return &guardTx{tx: tx, closed: new(atomic.Bool)} }

func (g *guardTx) close() { g.closed.Store(true) }

func (g *guardTx) check() error {
	if g.closed.Load() {
		return pgx.ErrTxClosed
	}
	return nil
}

// Begin starts a savepoint ("nested transaction") inside the transaction.
func (g *guardTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	sp, err := g.tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &guardTx{tx: sp, closed: g.closed, nested: true}, nil
}

// Commit releases a savepoint, and refuses for the transaction: the
// middleware commits.
func (g *guardTx) Commit(ctx context.Context) error {
	if err := g.check(); err != nil {
		return err
	}
	if g.nested {
		return g.tx.Commit(ctx)
	}
	return ErrTxManaged
}

// Rollback rolls a savepoint back, and refuses for the transaction: the
// middleware rolls back when the handler answers a 5xx or a rejection
// status. A deferred Rollback is harmless.
func (g *guardTx) Rollback(ctx context.Context) error {
	if err := g.check(); err != nil {
		return err
	}
	if g.nested {
		return g.tx.Rollback(ctx)
	}
	return ErrTxManaged
}

func (g *guardTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := g.check(); err != nil {
		return 0, err
	}
	return g.tx.CopyFrom(ctx, table, cols, src)
}

func (g *guardTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := g.check(); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return g.tx.SendBatch(ctx, b)
}

// LargeObjects returns the zero pgx.LargeObjects, which is unusable, once
// the handler returned.
func (g *guardTx) LargeObjects() pgx.LargeObjects {
	if g.check() != nil {
		return pgx.LargeObjects{}
	}
	return g.tx.LargeObjects()
}

func (g *guardTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.tx.Prepare(ctx, name, sql)
}

func (g *guardTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := g.check(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return g.tx.Exec(ctx, sql, args...)
}

func (g *guardTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.tx.Query(ctx, sql, args...)
}

func (g *guardTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := g.check(); err != nil {
		return errRow{err}
	}
	return g.tx.QueryRow(ctx, sql, args...)
}

// Conn returns the transaction's connection while the handler runs, and
// nil once it returned.
func (g *guardTx) Conn() *pgx.Conn {
	if g.check() != nil {
		return nil
	}
	return g.tx.Conn()
}

// errRow carries pgx.ErrTxClosed to a late QueryRow.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
