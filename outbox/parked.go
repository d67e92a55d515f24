package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// sqlParked lists parked messages from River's job table (%[1]s), of any
// of the outbox's queues: $1 kind, $2 the parked states (cast to River's
// state type, %[2]s), message ID over $3, the first $4 by message ID (see
// jobArgs: the
// relay does not give the jobs IDs in the messages' order). It reads what
// a ParkedMessage shows, the message and the outbox's record of its last
// delivery, and not River's errors column, which holds an error per
// delivery and grows with each re-drive: a listing allocates in
// proportion to the messages it returns, whatever their history.
const sqlParked = `SELECT id, args, jsonb_build_object('output', metadata->'output'), attempt, created_at, finalized_at, state::text
FROM %[1]s WHERE state = ANY($2::text[]::%[2]s[]) AND kind = $1 AND coalesce((args->>'id')::bigint, id) > $3
ORDER BY coalesce((args->>'id')::bigint, id) LIMIT $4`

// Parked returns up to limit parked messages whose ID is over after,
// oldest first (after 0 starts the list; pass the last ID to page on).
// Parked messages are kept until they are re-driven. ctx governs the
// call.
func (o *Outbox) Parked(ctx context.Context, after int64, limit int) ([]ParkedMessage, error) {
	table, state := o.tables()
	rows, err := o.pool.Query(ctx, fmt.Sprintf(sqlParked, table, state), kind, parkedStates, after, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("outbox: parked: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, scanParked)
	if err != nil {
		return nil, fmt.Errorf("outbox: parked: %w", err)
	}
	out := make([]ParkedMessage, 0, len(jobs))
	for _, job := range jobs {
		out = append(out, o.parkedFrom(job))
	}
	return out, nil
}

// scanParked reads a row of sqlParked into the fields of River's JobRow
// that parkedFrom reads, its times in UTC as River gives them.
func scanParked(row pgx.CollectableRow) (*rivertype.JobRow, error) {
	var job rivertype.JobRow
	var state string
	err := row.Scan(&job.ID, &job.EncodedArgs, &job.Metadata, &job.Attempt, &job.CreatedAt, &job.FinalizedAt, &state)
	job.State, job.CreatedAt = rivertype.JobState(state), job.CreatedAt.UTC()
	if job.FinalizedAt != nil {
		utc := job.FinalizedAt.UTC()
		job.FinalizedAt = &utc
	}
	return &job, err
}

func (o *Outbox) parkedFrom(job *rivertype.JobRow) ParkedMessage {
	rec := decodeRecord(job.Metadata)
	a, _ := decodeJobArgs(job.EncodedArgs)
	msg := a.message()
	p := ParkedMessage{
		ID: a.messageID(job.ID), Message: msg.clone(), Reason: Reason(rec.Outcome), Attempts: job.Attempt - rec.Base,
		Status: rec.Status, Header: rec.Header, Body: rec.Body, Err: rec.Error, EnqueuedAt: a.enqueuedAt(job.CreatedAt),
	}
	p = o.s.parked(p, rec)
	if job.State == rivertype.JobStateDiscarded {
		p.Reason = ReasonDiscarded
	}
	if job.FinalizedAt != nil {
		p.ParkedAt = *job.FinalizedAt
	}
	return p
}

// Redrive makes the parked message id due again, with its original key: it
// gets a new retry window ([Config.MaxAttempts] deliveries and
// [Config.MaxAge] from now). It returns [ErrNotParked] when id is not a
// parked message of the outbox, and [ErrPastRetention] when a delivery of
// it may have taken effect longer ago than [Config.KeyRetention]
// (see [ParkedMessage.RedriveBy]): the downstream may have forgotten the
// key, and the operation could run twice.
func (o *Outbox) Redrive(ctx context.Context, id int64) error {
	return o.redrive(ctx, id, false)
}

// RedrivePastRetention is [Outbox.Redrive] without the key retention's check:
// it sends a message again even when the downstream may have forgotten its
// key, which may run its operation a second time there. Use it only when that
// is known to be safe (the downstream keeps keys longer than
// [Config.KeyRetention] says, or it is known not to have acted). The key's
// retention is then counted anew from the next delivery.
func (o *Outbox) RedrivePastRetention(ctx context.Context, id int64) error {
	return o.redrive(ctx, id, true)
}

func (o *Outbox) redrive(ctx context.Context, id int64, force bool) error {
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		res, err := o.client.JobListTx(ctx, tx, byID(id).First(1))
		switch {
		case err != nil:
			return err
		case len(res.Jobs) == 0:
			return ErrNotParked
		}
		job := res.Jobs[0]
		if job.State != rivertype.JobStateCancelled && job.State != rivertype.JobStateDiscarded {
			return ErrNotParked
		}
		rec, err := o.s.redriven(job.ID, decodeRecord(job.Metadata), job.Attempt, force)
		if err != nil {
			return err
		}
		if _, err := o.client.JobUpdateTx(ctx, tx, job.ID, &river.JobUpdateParams{Output: rec}); err != nil {
			return err
		}
		_, err = o.client.JobRetryTx(ctx, tx, job.ID)
		return err
	})
	switch {
	case errors.Is(err, ErrNotParked), errors.Is(err, ErrPastRetention):
		return fmt.Errorf("%w: %d", err, id)
	case err != nil:
		return fmt.Errorf("outbox: redrive %d: %w", id, err)
	}
	return nil
}
