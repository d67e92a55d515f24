package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Parked returns up to limit parked messages whose ID is over after,
// oldest first (after 0 starts the list; pass the last ID to page on).
// Parked messages are kept until they are re-driven.
func (o *Outbox) Parked(ctx context.Context, after int64, limit int) ([]ParkedMessage, error) {
	limit = max(limit, 1)
	ids, err := o.parkedJobs(ctx, after, limit)
	if err != nil || len(ids) == 0 {
		return nil, wrapParked(err)
	}
	params := river.NewJobListParams().Kinds(kind).Queues(queueName).
		States(rivertype.JobStateCancelled, rivertype.JobStateDiscarded).IDs(ids...).First(limit)
	res, err := o.client.JobList(ctx, params)
	if err != nil {
		return nil, wrapParked(err)
	}
	out := make([]ParkedMessage, 0, len(res.Jobs))
	for _, job := range res.Jobs {
		out = append(out, o.parkedFrom(job))
	}
	slices.SortFunc(out, func(a, b ParkedMessage) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func wrapParked(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("outbox: parked: %w", err)
}

// sqlParked lists the job IDs of up to $5 parked messages (jobs of queue
// $2 and kind $3 in a state of $1) whose message ID (see jobArgs) is over
// $4, by message ID: River's list orders by job ID, which the relay does
// not keep in the messages' order. %[1]s is River's job table, %[2]s its
// state type.
const sqlParked = `SELECT id FROM %[1]s
WHERE state = ANY($1::text[]::%[2]s[]) AND queue = $2 AND kind = $3 AND coalesce((args->>'id')::bigint, id) > $4
ORDER BY coalesce((args->>'id')::bigint, id) LIMIT $5`

// parkedJobs returns the job IDs of the page of Parked.
func (o *Outbox) parkedJobs(ctx context.Context, after int64, limit int) ([]int64, error) {
	table, state := o.tables()
	rows, err := o.pool.Query(ctx, fmt.Sprintf(sqlParked, table, state), parkedStates, queueName, kind, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
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
// gets a new retry window (Config.MaxAttempts deliveries and
// Config.MaxAge from now). It returns ErrNotParked when id is not a
// parked message of the outbox, and ErrPastRetention when a delivery of
// it may have taken effect longer ago than Config.KeyRetention
// (see ParkedMessage.RedriveBy): the downstream may have forgotten the
// key, and the operation could run twice.
func (o *Outbox) Redrive(ctx context.Context, id int64) error {
	return o.redrive(ctx, id, false)
}

// RedrivePastRetention is Redrive without the key retention's check: it
// sends a message again even when the downstream may have forgotten its
// key, which may run its operation a second time there. Use it only when
// that is known to be safe (the downstream keeps keys longer than
// Config.KeyRetention says, or it is known not to have acted). The key's
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
		rec, err := o.s.redriven(decodeRecord(job.Metadata), job.Attempt, force)
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
