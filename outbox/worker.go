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

// Work takes one turn of the message (see dispatch), and tells River what
// follows: nil for a delivery, JobCancel for a parked message (River keeps
// it as cancelled), JobSnooze for a message put off or a dispatcher
// stopping (not counted as an attempt), or an error for a retry (after
// the wait NextRetry returns). The record of the delivery is kept in the
// job's output.
func (w *worker) Work(ctx context.Context, job *river.Job[jobArgs]) error {
	win := decodeRecord(job.Metadata)
	if win.Since.IsZero() {
		win.Since = job.CreatedAt
	}
	win = w.o.s.reopened(win, job.Attempt) // parked, then retried from River UI: see operator_retry.go
	msg := job.Args.message()
	t := w.o.s.dispatch(ctx, job.ID, &msg, job.Attempt-win.Base, win)
	switch {
	case t.putOff:
		return river.JobSnooze(t.wait)
	case t.stopping:
		_ = river.RecordOutput(ctx, t.rec)
		return river.JobSnooze(0)
	}
	w.o.release(t.release)
	return w.finish(ctx, t)
}

// finish records t's outcome, tells the Observer, and returns what River
// does.
func (w *worker) finish(ctx context.Context, t turn) error {
	if err := river.RecordOutput(ctx, t.rec); err != nil {
		w.o.s.Logger.ErrorContext(ctx, "outbox: cannot record the delivery", "id", t.d.ID, "error", err)
	}
	w.o.s.observe(ctx, t.d, t.v, t.wait)
	switch {
	case t.d.Reason != "":
		return river.JobCancel(&parkError{reason: t.d.Reason, rec: t.rec})
	case t.v == delivered:
		return nil
	}
	w.o.waits.Store(t.d.ID, t.wait)
	return &retryError{rec: t.rec}
}

// NextRetry is the policy of River's retry of a delivery (see retryPolicy).
func (w *worker) NextRetry(job *river.Job[jobArgs]) time.Time {
	return retryPolicy{w.o}.NextRetry(job.JobRow)
}
