package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Parked returns up to limit parked messages whose ID is over after,
// oldest first (after 0 starts the list; pass the last ID to page on).
// Parked messages are kept until they are re-driven.
func (o *Outbox) Parked(ctx context.Context, after int64, limit int) ([]ParkedMessage, error) {
	params := river.NewJobListParams().Kinds(kind).Queues(queueName).
		States(rivertype.JobStateCancelled, rivertype.JobStateDiscarded).
		OrderBy(river.JobListOrderByID, river.SortOrderAsc).
		Where("id > @after", river.NamedArgs{"after": after}).First(max(limit, 1))
	res, err := o.client.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("outbox: parked: %w", err)
	}
	out := make([]ParkedMessage, 0, len(res.Jobs))
	for _, job := range res.Jobs {
		out = append(out, o.parkedFrom(job))
	}
	return out, nil
}

func (o *Outbox) parkedFrom(job *rivertype.JobRow) ParkedMessage {
	rec := decodeRecord(job.Metadata)
	msg, _ := decodeArgs(job.EncodedArgs)
	p := ParkedMessage{
		ID: job.ID, Message: msg, Reason: Reason(rec.Outcome), Attempts: job.Attempt - rec.Base,
		Status: rec.Status, Header: rec.Header, Body: rec.Body, Err: rec.Error, EnqueuedAt: job.CreatedAt,
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
		job, err := o.client.JobGetTx(ctx, tx, id)
		switch {
		case errors.Is(err, river.ErrNotFound):
			return ErrNotParked
		case err != nil:
			return err
		case job.Kind != kind || (job.State != rivertype.JobStateCancelled && job.State != rivertype.JobStateDiscarded):
			return ErrNotParked
		}
		rec, err := o.s.redriven(decodeRecord(job.Metadata), job.Attempt, force)
		if err != nil {
			return err
		}
		if _, err := o.client.JobUpdateTx(ctx, tx, id, &river.JobUpdateParams{Output: rec}); err != nil {
			return err
		}
		_, err = o.client.JobRetryTx(ctx, tx, id)
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
