package server

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrTxManaged is returned by Commit and Rollback on the transaction that
// [Tx] gives a handler: the middleware commits or rolls it back by the
// handler's response status (a 5xx or a rejection status rolls back).
var ErrTxManaged = errors.New("server: the idempotency middleware commits or rolls back this transaction")

// ErrTxEnded is the error of a [Transactional] request whose handler ended
// the transaction that [Tx] gave it with SQL of its own (COMMIT, END,
// ROLLBACK, ABORT, PREPARE TRANSACTION, COMMIT AND CHAIN): from then on the
// methods of that Tx return it, and the middleware answers 500
// commit-failed and stores no response, because what the handler did may
// have committed without the idempotency record, or rolled back. [Hooks] see
// it in [Event.Err].
var ErrTxEnded = errors.New("server: the handler ended the idempotency middleware's transaction with SQL of its own; its response is not stored")

// guardTx is the pgx.Tx a handler gets, and the savepoints begun from it.
// It forwards to the real transaction until the middleware closes it,
// refuses Commit and Rollback of the transaction itself, and after close
// answers pgx.ErrTxClosed, Conn nil and LargeObjects the zero value, so
// that a handler that kept the Tx or a savepoint cannot reach the
// connection once it went back to the pool. A *pgx.Conn or LargeObjects
// that the handler took while it ran is not guarded: it must not be kept.
// guardTx does not embed pgx.Tx, so that a method pgx adds to the
// interface breaks the build until it is guarded here.
//
// It also watches for a handler that ends the transaction with SQL (see
// [ErrTxEnded]), without parsing any: before each call, after each call that
// has finished on the wire when it returns, and when the middleware closes
// it, it looks at the connection's transaction status, which pgconn keeps
// from the server's last ReadyForQuery message ('I': outside a transaction
// block), and after Exec at the command tag (COMMIT, which COMMIT AND CHAIN
// reports while leaving a new transaction open). It costs no round trip.
// It cannot see a transaction that one call ends and begins again
// ("COMMIT; BEGIN", ROLLBACK AND CHAIN, COMMIT AND CHAIN other than in
// Exec), nor one ended and begun again through the *pgx.Conn: those are
// caught where the record is written (sqlTryLock's mark; see Tx).
type guardTx struct {
	tx     pgx.Tx
	state  *guardState // shared by the transaction and its savepoints
	nested bool        // a savepoint: its Commit and Rollback are the handler's
}

// guardState is what a transaction's guardTx and its savepoints share.
type guardState struct {
	closed atomic.Bool // the middleware closed the guard: the handler returned
	ended  atomic.Bool // the handler ended the transaction
}

var _ pgx.Tx = (*guardTx)(nil)

func newGuardTx(tx pgx.Tx) *guardTx { return &guardTx{tx: tx, state: new(guardState)} }

// close ends the handler's use of the transaction. It returns [ErrTxEnded]
// when the handler ended the transaction: the middleware must then not
// commit what is open on the connection as the request's outcome.
func (g *guardTx) close() error {
	g.state.closed.Store(true)
	if g.ended() {
		return ErrTxEnded
	}
	return nil
}

func (g *guardTx) check() error {
	switch {
	case g.state.closed.Load():
		return pgx.ErrTxClosed
	case g.ended():
		return ErrTxEnded
	}
	return nil
}

// ended reports whether the handler ended the transaction: the server
// found the connection outside a transaction block at the end of its last
// command, now or at an earlier look. A failed transaction ('E') has not
// ended: its commit fails and rolls it back.
func (g *guardTx) ended() bool {
	if g.state.ended.Load() {
		return true
	}
	if g.tx.Conn().PgConn().TxStatus() != 'I' {
		return false
	}
	g.state.ended.Store(true)
	return true
}

// after returns the error of a call that has finished on the wire, with
// [ErrTxEnded] when the call ended the transaction.
func (g *guardTx) after(err error) error {
	if g.ended() {
		return errors.Join(err, ErrTxEnded)
	}
	return err
}

// Begin starts a savepoint ("nested transaction") inside the transaction.
func (g *guardTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	sp, err := g.tx.Begin(ctx)
	if err = g.after(err); err != nil {
		return nil, err
	}
	return &guardTx{tx: sp, state: g.state, nested: true}, nil
}

// Commit releases a savepoint, and refuses for the transaction: the
// middleware commits.
func (g *guardTx) Commit(ctx context.Context) error {
	if err := g.check(); err != nil {
		return err
	}
	if g.nested {
		return g.after(g.tx.Commit(ctx))
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
		return g.after(g.tx.Rollback(ctx))
	}
	return ErrTxManaged
}

func (g *guardTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := g.check(); err != nil {
		return 0, err
	}
	n, err := g.tx.CopyFrom(ctx, table, cols, src)
	return n, g.after(err)
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
	if g.state.closed.Load() {
		return pgx.LargeObjects{}
	}
	return g.tx.LargeObjects()
}

func (g *guardTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	sd, err := g.tx.Prepare(ctx, name, sql)
	return sd, g.after(err)
}

func (g *guardTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := g.check(); err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := g.tx.Exec(ctx, sql, args...)
	if tag.String() == "COMMIT" { // COMMIT AND CHAIN too, which leaves a new transaction open
		g.state.ended.Store(true)
	}
	return tag, g.after(err)
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
	if g.state.closed.Load() {
		return nil
	}
	return g.tx.Conn()
}

// errRow carries pgx.ErrTxClosed to a late QueryRow.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
