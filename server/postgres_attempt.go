package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// round is the answer of one claim round.
type round struct {
	inserted bool   // the INSERT won: this request owns the key
	found    *found // the record as it stands, when the INSERT did not win
}

// queueRound queues a claim round: bound the lock wait, try to insert the
// claim, read the record as it then stands (a statement of its own, so that
// it sees a claim that committed while the INSERT waited), restore the
// lock_timeout.
func (s *PostgresStore) queueRound(b *pgx.Batch, c *claimArgs, token uuid.UUID) {
	b.Queue(sqlSaveLockTimeout, lockTimeout(c.wait))
	b.Queue(sqlInsert, s.claimValues(c, token)...)
	b.Queue(sqlSelect, c.scope[:], s.offset())
	b.Queue(sqlRestoreLockTimeout)
}

// round sends one claim round on q.
func (s *PostgresStore) round(ctx context.Context, q sender, c *claimArgs, token uuid.UUID) (round, error) {
	b := &pgx.Batch{}
	s.queueRound(b, c, token)
	br := q.SendBatch(ctx, b)
	r, err := readRound(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return r, err
}

// readRound reads the results that queueRound queued.
func readRound(br pgx.BatchResults) (round, error) {
	var r round
	if _, err := br.Exec(); err != nil {
		return r, err
	}
	if err := br.QueryRow().Scan(&r.inserted); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return r, err
	}
	f, err := scanFound(br.QueryRow())
	if err != nil {
		return r, err
	}
	if !r.inserted {
		r.found = f // nil when the record vanished (swept) between the two
	}
	_, err = br.Exec()
	return r, err
}

func scanFound(row pgx.Row) (*found, error) {
	var f found
	var leftMicros *int64
	var status *int
	var header []byte
	var body []byte
	err := row.Scan(&f.fpAlg, &f.fp, &f.state, &f.token, &f.attempt, &f.expired, &leftMicros, &status, &header, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if leftMicros != nil {
		f.leaseLeft = time.Duration(*leftMicros) * time.Microsecond
	}
	if f.state != stateRunning && status != nil {
		h, err := decodeHeader(header)
		if err != nil {
			return nil, fmt.Errorf("server: stored headers: %w", err)
		}
		f.resp = &response{state: f.state, status: *status, header: h, body: body}
	}
	return &f, nil
}

// bounded runs one statement under the claim's lock wait bound and scans
// its row.
func (s *PostgresStore) bounded(ctx context.Context, q sender, wait time.Duration, scan func(pgx.Row) error, sql string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(sqlSaveLockTimeout, lockTimeout(wait))
	b.Queue(sql, args...)
	b.Queue(sqlRestoreLockTimeout)
	br := q.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = scan(br.QueryRow())
		if err == nil || errors.Is(err, pgx.ErrNoRows) {
			_, rerr := br.Exec()
			err = errors.Join(err, rerr)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// pgTxAttempt is a Transactional claim: an open transaction on a
// connection of its own, which the handler shares through a guardTx.
type pgTxAttempt struct {
	s     *PostgresStore
	conn  *pgxpool.Conn
	tx    pgx.Tx
	guard *guardTx
	scope [32]byte
	token uuid.UUID
	n     int
}

func newTxAttempt(s *PostgresStore, conn *pgxpool.Conn, tx pgx.Tx, scope [32]byte, token uuid.UUID, n int) *pgTxAttempt {
	return &pgTxAttempt{s: s, conn: conn, tx: tx, guard: &guardTx{Tx: tx}, scope: scope, token: token, n: n}
}

func (a *pgTxAttempt) number() int       { return a.n }
func (a *pgTxAttempt) handlerTx() pgx.Tx { return a.guard }
func (a *pgTxAttempt) lease() *Lease     { return nil }

// complete stores the response and commits in one round trip. Any failure
// (the handler's statements had aborted the transaction, the commit failed,
// the connection broke) is an error: the caller must not send the
// handler's response, whose effects may not have committed.
func (a *pgTxAttempt) complete(ctx context.Context, res *response) error {
	a.guard.close()
	b := &pgx.Batch{}
	b.Queue(sqlComplete, a.scope[:], a.token, res.state, res.status, encodeHeader(res.header), res.body)
	b.Queue("commit")
	br := a.conn.SendBatch(ctx, b)
	updated, err := br.Exec()
	if err == nil && updated.RowsAffected() != 1 {
		err = errors.New("the claimed record is gone")
	}
	if err == nil {
		var committed pgconn.CommandTag
		committed, err = br.Exec()
		if err == nil && committed.String() != "COMMIT" {
			err = fmt.Errorf("commit answered %s", committed)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	endTx(ctx, a.conn, a.tx) // rolls back only what did not commit
	if err != nil {
		return fmt.Errorf("server: commit: %w", err)
	}
	return nil
}

// abort rolls the transaction back: claim and effects vanish together.
func (a *pgTxAttempt) abort(ctx context.Context, reject bool) error {
	a.guard.close()
	err := a.tx.Rollback(ctx)
	a.conn.Release()
	if err != nil {
		return fmt.Errorf("server: rollback: %w", err)
	}
	return nil
}

// pgFence runs the token-fenced statements of an attempt.
type pgFence struct {
	s     *PostgresStore
	scope [32]byte
	token uuid.UUID
}

// exec runs a fenced statement; ErrLeaseLost when it changed no row.
func (f pgFence) exec(ctx context.Context, sql string, args ...any) error {
	tag, err := f.s.db.Exec(ctx, sql, append([]any{f.scope[:], f.token}, args...)...)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

func (f pgFence) extend(ctx context.Context, d time.Duration) error {
	return f.exec(ctx, sqlExtend, d, f.s.offset())
}

func (f pgFence) checkpoint(ctx context.Context, point string, data []byte) error {
	return f.exec(ctx, sqlCheckpoint, point, data)
}

func (f pgFence) complete(ctx context.Context, res *response) error {
	return f.exec(ctx, sqlComplete, res.state, res.status, encodeHeader(res.header), res.body)
}

// abort releases the key when the request was refused on a first attempt
// that recorded no recovery point, and otherwise ends the lease at once so
// that the next retry takes over and learns what this attempt reached.
func (f pgFence) abort(ctx context.Context, reject bool) error {
	if reject {
		if err := f.exec(ctx, sqlRelease); !errors.Is(err, ErrLeaseLost) {
			return err
		}
	}
	return f.exec(ctx, sqlEndLease, f.s.offset())
}
