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

// guardTx is the pgx.Tx a handler gets. It forwards to the real
// transaction until the middleware closes it, refuses Commit and Rollback,
// and after close answers pgx.ErrTxClosed, so that a handler that kept the
// Tx cannot reach a connection that went back to the pool. Methods pgx may
// add later are forwarded by the embedding.
type guardTx struct {
	pgx.Tx
	closed atomic.Bool
}

var _ pgx.Tx = (*guardTx)(nil)

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
	return g.Tx.Begin(ctx)
}

// Commit refuses: the middleware commits.
func (g *guardTx) Commit(context.Context) error {
	if err := g.check(); err != nil {
		return err
	}
	return ErrTxManaged
}

// Rollback refuses: the middleware rolls back when the handler answers a
// 5xx or a rejection status. A deferred Rollback is harmless.
func (g *guardTx) Rollback(context.Context) error {
	if err := g.check(); err != nil {
		return err
	}
	return ErrTxManaged
}

func (g *guardTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := g.check(); err != nil {
		return 0, err
	}
	return g.Tx.CopyFrom(ctx, table, cols, src)
}

func (g *guardTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := g.check(); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return g.Tx.SendBatch(ctx, b)
}

func (g *guardTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.Tx.Prepare(ctx, name, sql)
}

func (g *guardTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := g.check(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return g.Tx.Exec(ctx, sql, args...)
}

func (g *guardTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.Tx.Query(ctx, sql, args...)
}

func (g *guardTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := g.check(); err != nil {
		return errRow{err}
	}
	return g.Tx.QueryRow(ctx, sql, args...)
}

// errRow carries pgx.ErrTxClosed to a late QueryRow.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
