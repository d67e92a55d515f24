package server

import (
	"context"
	"database/sql"
)

// SQLTx returns the database/sql transaction of the [Transactional] request
// that ctx belongs to, when its store hands a *sql.Tx ([PostgresSQLStore],
// or a store of one's own through [TxAttempt]). The handler makes its
// mutations in it, directly or through an ORM that accepts a *sql.Tx; the
// middleware commits them together with the stored response, or rolls
// them back (a 5xx, a rejection status, a panic). Once the handler has
// returned, the transaction's methods return sql.ErrTxDone.
//
// The transaction is the middleware's, but a *sql.Tx cannot refuse its own
// Commit and Rollback as [Tx]'s pgx.Tx does: the handler must not call
// them, nor end the transaction with SQL (COMMIT, ROLLBACK, ...). A store
// that hands a *sql.Tx must catch it when it does (see [TxAttempt]), and the
// request then gets 500 commit-failed with no response stored, as with
// [Tx]: what the handler committed itself stays committed, without the
// record, and a retry runs the handler again. SQLTx returns nil, false with
// a store that hands no *sql.Tx, on a [Leased] route, and outside the
// middleware.
func SQLTx(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := txOf(ctx).(*sql.Tx)
	return tx, ok && tx != nil
}

// txOf is the transaction of the request ctx belongs to, as its store's
// [TxAttempt] hands it; nil when there is none.
func txOf(ctx context.Context) any {
	x := runnerFrom(ctx)
	if x == nil {
		return nil
	}
	if a, ok := x.att.(TxAttempt); ok {
		return a.Tx()
	}
	return nil
}
