package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// ErrUnknownMessage: [Outbox.Lookup] or [Outbox.LookupKey] named a message
// that the outbox does not hold: never enqueued (or its transaction rolled
// back), delivered more than 24 h ago and deleted, or (Lookup) enqueued
// again under the key of a message relayed before it, and folded into
// that one by the relay (see [Outbox.Enqueue]).
var ErrUnknownMessage = errors.New("outbox: no such message")

// MessageState says where a message stands.
type MessageState string

// The states of a message ([MessageStatus.State]).
const (
	// StateEnqueued: its transaction committed, and it waits for a
	// dispatcher's relay to move it into the queue (within milliseconds
	// while a dispatcher runs; see the package doc, "The queue"). No
	// delivery was made. The [Memory] outbox has no such state.
	StateEnqueued MessageState = "enqueued"
	// StatePending: waiting for its first or next delivery (due now, or
	// after a backoff: [MessageStatus.NextAttempt]).
	StatePending MessageState = "pending"
	// StateDelivering: a dispatcher is delivering it now.
	StateDelivering MessageState = "delivering"
	// StateDelivered: a delivery succeeded; the message is kept 24 h.
	StateDelivered MessageState = "delivered"
	// StateParked: the outbox gave up on it (see [ParkedMessage.Reason]);
	// [Outbox.Redrive] sends it again.
	StateParked MessageState = "parked"
)

// MessageStatus is a message of any state with what its last delivery
// got, for an operator asking "why was this webhook not delivered?". Its
// [ParkedMessage] fields are those of a parked message; Reason and ParkedAt
// are set only when the message is parked.
type MessageStatus struct {
	ParkedMessage
	State MessageState
	// NextAttempt is when a pending message is due next; DeliveredAt is
	// when a delivered one was delivered. Zero otherwise.
	NextAttempt, DeliveredAt time.Time
}

// Lookup returns the message id, in any state, or an error that wraps
// [ErrUnknownMessage]. A message that waits to be relayed is found by a
// scan of the table of enqueued messages, which holds only those. ctx
// governs the call.
func (o *Outbox) Lookup(ctx context.Context, id int64) (MessageStatus, error) {
	e, err := o.enqueuedByID(ctx, id)
	if err == nil || !isNoRows(err) {
		return e.status(), wrapLookup(err)
	}
	return o.lookup(ctx, byID(id), fmt.Sprintf("id %d", id))
}

// LookupKey returns the message enqueued under the Idempotency-Key key
// ([DeriveKey] gives the key of an operation's message), in any state, or
// an error that wraps [ErrUnknownMessage]: the message waiting to be
// relayed, or the first one enqueued under key among the messages pending,
// parked, and delivered in the last 24 h. ctx governs the call.
func (o *Outbox) LookupKey(ctx context.Context, key string) (MessageStatus, error) {
	e, err := o.enqueuedByKey(ctx, o.pool, key)
	if err == nil || !isNoRows(err) {
		return e.status(), wrapLookup(err)
	}
	return o.lookup(ctx, byKey(key), fmt.Sprintf("key %q", key))
}

func wrapLookup(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("outbox: lookup: %w", err)
}

func (o *Outbox) lookup(ctx context.Context, params *river.JobListParams, what string) (MessageStatus, error) {
	res, err := o.client.JobList(ctx, params.First(1))
	if err != nil {
		return MessageStatus{}, wrapLookup(err)
	}
	if len(res.Jobs) == 0 {
		return MessageStatus{}, fmt.Errorf("%w: %s", ErrUnknownMessage, what)
	}
	return o.statusOf(res.Jobs[0]), nil
}

// statusOf is the status of the message job.
func (o *Outbox) statusOf(job *rivertype.JobRow) MessageStatus {
	st := MessageStatus{ParkedMessage: o.parkedFrom(job)}
	switch job.State {
	case rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
		st.State = StateParked
		return st
	case rivertype.JobStateRunning:
		st.State = StateDelivering
	case rivertype.JobStateCompleted:
		st.State = StateDelivered
		st.DeliveredAt = st.ParkedAt
	default:
		st.State, st.NextAttempt = StatePending, job.ScheduledAt
	}
	st.Reason, st.ParkedAt = "", time.Time{}
	return st
}

// Lookup returns the message id, in any state, or an error that wraps
// [ErrUnknownMessage], as [Outbox.Lookup] does.
func (q *Memory) Lookup(_ context.Context, id int64) (MessageStatus, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.msgs[id]
	if m == nil {
		return MessageStatus{}, fmt.Errorf("%w: id %d", ErrUnknownMessage, id)
	}
	return q.statusLocked(id, m), nil
}

// LookupKey returns the message enqueued under key, as
// [Outbox.LookupKey] does.
func (q *Memory) LookupKey(_ context.Context, key string) (MessageStatus, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	id, ok := q.byKey[key]
	if !ok {
		return MessageStatus{}, fmt.Errorf("%w: key %q", ErrUnknownMessage, key)
	}
	return q.statusLocked(id, q.msgs[id]), nil
}

func (q *Memory) statusLocked(id int64, m *memMsg) MessageStatus {
	st := MessageStatus{ParkedMessage: q.parkedLocked(id, m)}
	switch m.state {
	case memParked:
		st.State = StateParked
		return st
	case memRunning:
		st.State = StateDelivering
	case memDelivered:
		st.State = StateDelivered
	default:
		st.State = StatePending
	}
	st.Reason, st.ParkedAt = "", time.Time{}
	return st
}

// parkedLocked is message m (id) as Parked shows it.
func (q *Memory) parkedLocked(id int64, m *memMsg) ParkedMessage {
	return q.s.parked(ParkedMessage{
		ID: id, Message: m.msg.clone(), Reason: Reason(m.rec.Outcome), Attempts: m.attempts - m.rec.Base,
		Status: m.rec.Status, Header: m.rec.Header, Body: m.rec.Body, Err: m.rec.Error,
		EnqueuedAt: m.enqueuedAt, ParkedAt: m.parkedAt,
	}, m.rec)
}
