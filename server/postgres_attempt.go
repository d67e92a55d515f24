package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/trace"
)

// insert tries to claim the key in [Leased] mode: true when this request now
// owns it, false when the key is taken.
func (s *PostgresStore) insert(ctx context.Context, q querier, c *Claim, token uuid.UUID) (bool, error) {
	var inserted bool
	start := trace.Begin()
	err := q.QueryRow(ctx, sqlInsert, s.claimValues(c, token)...).Scan(&inserted)
	s.traceClaim(c, trace.Insert, uuid.Nil, token, inserted, start, err)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return inserted, err
}

// read reads the record as it stands, in a statement of its own so that it
// sees a claim that committed while an earlier statement waited; nil when
// there is none.
func (s *PostgresStore) read(ctx context.Context, q querier, c *Claim) (*found, error) {
	start := trace.Begin()
	f, err := scanFound(q.QueryRow(ctx, sqlRead, c.Scope[:], s.offset()))
	if err == nil {
		s.traceRead(c, f, start)
	}
	return f, err
}

// pgFence runs the token-fenced statements of an attempt.
type pgFence struct {
	s     *PostgresStore
	scope [32]byte
	token uuid.UUID
}

// exec runs a fenced statement; [ErrLeaseLost] when it changed no row.
func (f pgFence) exec(ctx context.Context, sql string, args ...any) error {
	start := trace.Begin()
	err := f.run(ctx, sql, args...)
	if trace.On() {
		f.trace(sql, args, start, err)
	}
	return err
}

func (f pgFence) run(ctx context.Context, sql string, args ...any) error {
	tag, err := f.s.db.Exec(ctx, sql, append([]any{f.scope[:], [16]byte(f.token)}, args...)...)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

func (f pgFence) Extend(ctx context.Context, d, margin time.Duration) error {
	return f.exec(ctx, sqlExtend, d, f.s.offset(), margin)
}

func (f pgFence) Checkpoint(ctx context.Context, point string, data []byte) error {
	return f.exec(ctx, sqlCheckpoint, point, data)
}

func (f pgFence) Complete(ctx context.Context, res *Response) error {
	state, status, headers := responseValues(res)
	return f.exec(ctx, completeSQL(), state, status, headers)
}

// abort releases the key when the request was refused on a first attempt
// that recorded no recovery point, and otherwise ends the lease at once so
// that the next retry takes over and learns what this attempt reached.
func (f pgFence) Abort(ctx context.Context, reject bool) error {
	if reject {
		if err := f.exec(ctx, sqlRelease); !errors.Is(err, ErrLeaseLost) {
			return err
		}
	}
	return f.exec(ctx, sqlEndLease, f.s.offset())
}
