package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// insert tries to claim the key: true when this request now owns it.
func (s *PostgresStore) insert(ctx context.Context, q querier, c *claimArgs, token uuid.UUID) (bool, error) {
	return scanClaim(q.QueryRow(ctx, sqlInsert, s.claimValues(c, token)...))
}

// scanClaim reads the RETURNING row of sqlInsert: none when the key is taken.
func scanClaim(row pgx.Row) (bool, error) {
	var restored string
	err := row.Scan(&restored)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// read reads the record as it stands, in a statement of its own so that it
// sees a claim that committed while an earlier statement waited, and puts
// back the session's lock_timeout; nil when there is none.
func (s *PostgresStore) read(ctx context.Context, q querier, c *claimArgs) (*found, error) {
	return scanFound(q.QueryRow(ctx, sqlSelect, c.scope[:], s.offset()))
}

// scanFound reads the row of sqlSelect or sqlRead.
func scanFound(row pgx.Row) (*found, error) {
	var f found
	var present bool
	var fpAlg, state *string
	var token *[16]byte
	var attempt *int
	var expired *bool
	var leftMicros *int64
	var status *int
	var header, body []byte
	err := row.Scan(&present, &fpAlg, &f.fp, &state, &token, &attempt, &expired, &leftMicros, &status, &header, &body)
	if err != nil || !present {
		return nil, err
	}
	f.fpAlg, f.state, f.token, f.attempt, f.expired = *fpAlg, recordState(*state), uuid.UUID(*token), *attempt, *expired
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

// pgFence runs the token-fenced statements of an attempt.
type pgFence struct {
	s     *PostgresStore
	scope [32]byte
	token uuid.UUID
}

// exec runs a fenced statement; ErrLeaseLost when it changed no row.
func (f pgFence) exec(ctx context.Context, sql string, args ...any) error {
	tag, err := f.s.db.Exec(ctx, sql, append([]any{f.scope[:], [16]byte(f.token)}, args...)...)
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
	return f.exec(ctx, sqlComplete, string(res.state), res.status, encodeHeader(res.header), res.body)
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
