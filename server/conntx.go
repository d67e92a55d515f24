package server

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// connTx is the transaction that a [Transactional] claim began on the wire,
// in its first round trip (begin), as a pgx.Tx for the handler (behind a
// guardTx). pgx builds a Tx of its own only with its own BEGIN, which would
// cost the claim a round trip; pgx documents Tx as an interface so that
// others can implement it, and connTx does, over the documented methods of
// the *pgx.Conn: its statements run in whichever transaction is open on the
// connection, which is the claim's while the handler runs. Begin starts a
// savepoint, as pgx's Tx does. Its Commit and Rollback are never reached
// (guardTx refuses them: the store commits or rolls back on the
// connection). LargeObjects returns pgx's zero LargeObjects, which is
// unusable: pgx builds a usable one only for a Tx of its own.
type connTx struct {
	conn       *pgx.Conn
	savepoints int64 // savepoints begun in this transaction, to name the next
}

var _ pgx.Tx = (*connTx)(nil)

// Begin starts a savepoint.
func (t *connTx) Begin(ctx context.Context) (pgx.Tx, error) {
	t.savepoints++
	sp := &savepointTx{connTx: t, name: "sp_" + strconv.FormatInt(t.savepoints, 10)}
	if _, err := t.conn.Exec(ctx, "savepoint "+sp.name); err != nil {
		return nil, err
	}
	return sp, nil
}

// Commit is never called: guardTx answers [ErrTxManaged].
func (t *connTx) Commit(context.Context) error { return ErrTxManaged }

// Rollback is never called: guardTx answers [ErrTxManaged].
func (t *connTx) Rollback(context.Context) error { return ErrTxManaged }

func (t *connTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t *connTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects returns the zero pgx.LargeObjects, which is unusable.
func (t *connTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *connTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *connTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t *connTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t *connTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *connTx) Conn() *pgx.Conn { return t.conn }

// savepointTx is a savepoint begun in a connTx ("a pseudo nested
// transaction", in pgx's words): Commit releases it and Rollback rolls
// back to it, as pgx's own do; either ends it (pgx.ErrTxClosed after).
type savepointTx struct {
	*connTx
	name   string
	closed bool
}

// Commit releases the savepoint.
func (sp *savepointTx) Commit(ctx context.Context) error {
	return sp.end(ctx, "release savepoint ")
}

// Rollback rolls back to the savepoint. It returns pgx.ErrTxClosed after
// Commit or Rollback, so a deferred Rollback is harmless.
func (sp *savepointTx) Rollback(ctx context.Context) error {
	return sp.end(ctx, "rollback to savepoint ")
}

func (sp *savepointTx) end(ctx context.Context, verb string) error {
	if sp.closed {
		return pgx.ErrTxClosed
	}
	sp.closed = true
	_, err := sp.conn.Exec(ctx, verb+sp.name)
	return err
}

// The statements of a savepoint that has ended fail with pgx.ErrTxClosed,
// as pgx's do; before, they run in the transaction.

func (sp *savepointTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if sp.closed {
		return nil, pgx.ErrTxClosed
	}
	return sp.connTx.Begin(ctx)
}

func (sp *savepointTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if sp.closed {
		return 0, pgx.ErrTxClosed
	}
	return sp.connTx.CopyFrom(ctx, table, cols, src)
}

func (sp *savepointTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if sp.closed {
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	}
	return sp.connTx.SendBatch(ctx, b)
}

func (sp *savepointTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if sp.closed {
		return nil, pgx.ErrTxClosed
	}
	return sp.connTx.Prepare(ctx, name, sql)
}

func (sp *savepointTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if sp.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return sp.connTx.Exec(ctx, sql, args...)
}

func (sp *savepointTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if sp.closed {
		return nil, pgx.ErrTxClosed
	}
	return sp.connTx.Query(ctx, sql, args...)
}

func (sp *savepointTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if sp.closed {
		return errRow{pgx.ErrTxClosed}
	}
	return sp.connTx.QueryRow(ctx, sql, args...)
}
