package server

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
)

// errNoJoin is the error of StoreInTx outside a claim that can store its
// record in the app's transaction.
var errNoJoin = errors.New("server: StoreInTx: the request has no Transactional claim of a PostgresStore or a PostgresSQLStore")

// StoreInTx writes the record of the [Transactional] request that ctx
// belongs to in tx, a transaction the app began itself (its repository's),
// with the response the handler has written so far: the app's mutations
// and the record then commit together when the app commits tx, or vanish
// together. It is for code that begins and commits its own transactions
// rather than working in [Tx]'s; the middleware still claims the key (a
// duplicate waits for it, then replays) and holds the response until it
// has seen the record committed.
//
// Write the whole response first, then call StoreInTx, then commit:
//
//	tx, err := pool.Begin(ctx) // the repository's own transaction
//	... the mutations, in tx ...
//	w.Header().Set("Content-Type", "application/json")
//	w.WriteHeader(http.StatusCreated)
//	_, _ = w.Write(body)
//	if err := server.StoreInTx(ctx, tx); err != nil { ... roll back, answer 500 ... }
//	err = tx.Commit(ctx)
//
// The client then gets exactly the stored response, whatever the handler
// writes after StoreInTx, so that a retry's replay is the same bytes. If tx
// does not commit, the request gets 500 commit-failed and a retry runs
// afresh. It returns an error for a status that would not be stored (a 5xx
// or a rejection status), for a second call, with a store other than
// [PostgresStore] and [PostgresSQLStore], on a [Leased] route, and
// outside the middleware. A handler that stores its response this way must
// not flush it.
func StoreInTx(ctx context.Context, tx pgx.Tx) error {
	return storeIn(ctx, func(ctx context.Context, sql string, args ...any) (int64, error) {
		tag, err := tx.Exec(ctx, sql, args...)
		return tag.RowsAffected(), err
	})
}

// StoreInSQLTx is [StoreInTx] for a database/sql transaction the app
// began, on any driver whose arguments are text, bytes and integers (pgx's
// stdlib, lib/pq).
func StoreInSQLTx(ctx context.Context, tx *sql.Tx) error {
	return storeIn(ctx, func(ctx context.Context, sql string, args ...any) (int64, error) {
		r, err := tx.ExecContext(ctx, sql, args...)
		if err != nil {
			return 0, err
		}
		return r.RowsAffected()
	})
}

// errJoinedStream refuses to stream a response that StoreInTx stored.
var errJoinedStream = errors.New("server: a response stored by StoreInTx is sent when the handler returns, not streamed")

// execFunc runs a statement in the app's transaction and counts its rows.
type execFunc func(ctx context.Context, sql string, args ...any) (int64, error)

// joiner is an [Attempt] whose record the app's own transaction may write.
type joiner interface {
	// joinRecord writes the record of res through exec.
	joinRecord(ctx context.Context, exec execFunc, res *Response) error
	// endJoined ends the claim and reports whether the record committed.
	endJoined(ctx context.Context) (bool, error)
}

// sent is the response a joined request sends: the one stored.
type sent struct {
	status int
	header http.Header
	body   []byte
}

func storeIn(ctx context.Context, exec execFunc) error {
	x := runnerFrom(ctx)
	if x == nil || x.settled {
		return errNoJoin
	}
	j, ok := x.att.(joiner)
	switch {
	case !ok:
		return errNoJoin
	case x.joined != nil:
		return errors.New("server: StoreInTx: the request's response is stored already")
	case x.cw.status == 0:
		return errors.New("server: StoreInTx: write the response before storing it")
	case x.h.s.outcome(x.cw.status) != outcomeStore:
		return fmt.Errorf("server: StoreInTx: a %d rolls back: it is not stored", x.cw.status)
	}
	x.cw.finish()
	if err := j.joinRecord(ctx, exec, x.cw.response(stateDone, x.h.s.allow)); err != nil {
		return fmt.Errorf("server: StoreInTx: %w", err)
	}
	x.joined = &sent{status: x.cw.status, header: x.cw.header.Clone(), body: bytes.Clone(x.cw.body.Bytes())}
	return nil
}

// recordArgs are the arguments of sqlInsertRecord, as text, bytes and
// integers that any Postgres driver sends.
func recordArgs(c *Claim, token string, offset time.Duration, res *Response) []any {
	state, status, stored := responseValues(res)
	return []any{c.Scope[:], c.Tenant, c.Principal, c.Route, c.Key, c.DigestAlg, c.Digest,
		token, micros(offset), micros(c.Retention), state, status, stored}
}

// micros renders d as an interval.
func micros(d time.Duration) string { return fmt.Sprintf("%d microseconds", d.Microseconds()) }

// sqlJoined reports whether a joined record committed: $1 scope, $2 token.
const sqlJoined = `SELECT EXISTS (SELECT 1 FROM idem_records WHERE scope_hash = $1 AND token = $2 AND state <> 'running')`

// sqlClearStale deletes the record that a claim reclaimed or took over in
// its transaction, so that the app's transaction can insert the record
// afresh: $1 scope, $2 token.
const sqlClearStale = `DELETE FROM idem_records WHERE scope_hash = $1 AND token = $2`

// finishJoined settles a request whose handler stored its response in its
// own transaction: the claim ends, and the stored response goes out if the
// record committed, else 500 commit-failed.
func (x *runner) finishJoined() {
	x.cw.finish()
	x.ev.Status, x.ev.Elapsed = x.joined.status, 0
	call(x.h.s.Hooks.Handled, x.ctx, x.ev)
	ctx, cancel := detached(x.ctx)
	defer cancel()
	start := time.Now()
	committed, err := x.att.(joiner).endJoined(ctx)
	x.settled, x.ev.Elapsed = true, time.Since(start)
	if err == nil && !committed {
		err = errors.New("server: the app's transaction did not commit the record")
	}
	if err != nil {
		x.commitFailed(err)
		return
	}
	call(x.h.s.Hooks.Committed, x.ctx, x.ev)
	x.h.s.log(x.ctx, slog.LevelDebug, "idem: committed in the app's transaction", x.ev)
	x.cw.status, x.cw.header = x.joined.status, x.joined.header
	x.cw.body.Reset()
	x.cw.body.Write(x.joined.body)
	x.tell(x.standing(outcomeStore))
	x.cw.send(true)
}
