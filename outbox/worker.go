package outbox

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/riverqueue/river"
)

// jobArgs is a Message as River stores it (the job's args, JSON). Its key
// makes it unique (see allStates).
type jobArgs struct {
	Name   string      `json:"name"`
	Method string      `json:"method"`
	URL    string      `json:"url"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
	Key    string      `json:"key" river:"unique"`
}

// Kind names the outbox's job kind for River.
func (jobArgs) Kind() string { return kind }

// toArgs is m as River stores it; m is the copy prepare made, not the
// caller's.
func toArgs(m *Message) jobArgs { return jobArgs(*m) }

func (a jobArgs) message() Message { return Message(a) }

func decodeArgs(encoded []byte) (Message, error) {
	var a jobArgs
	err := json.Unmarshal(encoded, &a)
	m := a.message()
	return m.clone(), err
}

// worker delivers the outbox's jobs.
type worker struct {
	river.WorkerDefaults[jobArgs]
	o *Outbox
}

// Timeout is River's bound on a delivery job: a second over the
// delivery's own timeout, which ends it first.
func (w *worker) Timeout(*river.Job[jobArgs]) time.Duration { return w.o.s.jobTimeout() }

// Work delivers the message once, and tells River what follows: nil for
// a delivery, JobCancel for a parked message (River keeps it as
// cancelled), or an error for a retry (after the wait NextRetry returns).
// The record of the delivery is kept in the job's output.
func (w *worker) Work(ctx context.Context, job *river.Job[jobArgs]) error {
	s := w.o.s
	win := decodeRecord(job.Metadata)
	if win.Since.IsZero() {
		win.Since = job.CreatedAt
	}
	msg := job.Args.message()
	d := Delivery{ID: job.ID, Name: msg.Name, Key: msg.Key, Attempt: job.Attempt - win.Base}
	if reason := s.overdue(d.Attempt, win.Since); reason != "" {
		// Dispatchers died delivering it: park it with its last record.
		win.Outcome, d.Reason = string(reason), reason
		return w.finish(ctx, d, win, retry, 0)
	}
	r := deliver(ctx, s, &msg)
	if r.verdict == retry && ctx.Err() != nil {
		// The dispatcher is stopping (or River's bound passed): deliver it
		// again at once, elsewhere, without counting this delivery.
		_ = river.RecordOutput(ctx, newRecord(r, "", win))
		return river.JobSnooze(0)
	}
	reason, wait := s.decide(r, d.Attempt, win.Since)
	d.Status, d.Err, d.Reason = r.status, r.err, reason
	return w.finish(ctx, d, newRecord(r, reason, win), r.verdict, wait)
}

// finish records rec, tells the Observer, and returns what River does.
func (w *worker) finish(ctx context.Context, d Delivery, rec record, v verdict, wait time.Duration) error {
	if err := river.RecordOutput(ctx, rec); err != nil {
		w.o.s.Logger.ErrorContext(ctx, "outbox: cannot record the delivery", "id", d.ID, "error", err)
	}
	w.o.s.observe(ctx, d, v, wait)
	switch {
	case d.Reason != "":
		return river.JobCancel(&parkError{reason: d.Reason, rec: rec})
	case v == delivered:
		return nil
	case v == deferred:
		return river.JobSnooze(wait) // not counted as an attempt
	}
	w.o.waits.Store(d.ID, wait)
	return &retryError{rec: rec}
}

// NextRetry is the policy of River's retry of a delivery (see retryPolicy).
func (w *worker) NextRetry(job *river.Job[jobArgs]) time.Time {
	return retryPolicy{w.o}.NextRetry(job.JobRow)
}
