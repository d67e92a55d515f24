package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/riverqueue/river"
)

// jobArgs is a Message as River stores it (the job's args, JSON), with
// what the relay adds: the message's ID (0 in a job enqueued before the
// relay existed: its job ID is then its message's ID), its enqueue time,
// and, for a message enqueued under a key that another message had when
// it was relayed, that message's ID (see relay.go). Its key alone makes it
// unique (see allStates).
type jobArgs struct {
	Name       string      `json:"name"`
	Method     string      `json:"method"`
	URL        string      `json:"url"`
	Header     http.Header `json:"header,omitempty"`
	Body       []byte      `json:"body,omitempty"`
	Key        string      `json:"key" river:"unique"`
	ID         int64       `json:"id,omitempty"`
	EnqueuedAt time.Time   `json:"enqueued_at,omitzero"`
	Conflict   int64       `json:"conflict,omitempty"`
}

// Kind names the outbox's job kind for River.
func (jobArgs) Kind() string { return kind }

// toArgs is m as River stores it; m is the copy prepare made, not the
// caller's.
func toArgs(m *Message) jobArgs {
	return jobArgs{Name: m.Name, Method: m.Method, URL: m.URL, Header: m.Header, Body: m.Body, Key: m.Key}
}

func (a jobArgs) message() Message {
	return Message{Name: a.Name, Method: a.Method, URL: a.URL, Header: a.Header, Body: a.Body, Key: a.Key}
}

// messageID is the ID of the message of the job jobID whose args are a.
func (a jobArgs) messageID(jobID int64) int64 {
	if a.ID != 0 {
		return a.ID
	}
	return jobID
}

// enqueuedAt is when the message of a job created at created was
// enqueued.
func (a jobArgs) enqueuedAt(created time.Time) time.Time {
	if a.EnqueuedAt.IsZero() {
		return created
	}
	return a.EnqueuedAt.UTC()
}

func decodeJobArgs(encoded []byte) (jobArgs, error) {
	var a jobArgs
	err := json.Unmarshal(encoded, &a)
	return a, err
}

func decodeArgs(encoded []byte) (Message, error) {
	a, err := decodeJobArgs(encoded)
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
		win.Since = job.Args.enqueuedAt(job.CreatedAt)
	}
	if job.Args.Conflict != 0 && win.Outcome == "" {
		return w.finish(ctx, w.conflict(job, win))
	}
	win = w.o.s.reopened(job.ID, win, job.Attempt) // parked, then retried from River UI: see operator_retry.go
	msg := job.Args.message()
	t := w.o.s.dispatch(ctx, w.o.lanes.of(job.Queue), job.ID, &msg, job.Attempt-win.Base, win)
	t.d.ID = job.Args.messageID(job.ID)
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

// conflict is the turn of a message enqueued under a key that another
// message had when it was relayed (see relay.go): it is parked, unsent,
// with ReasonKeyConflict, and sent only when it is re-driven (or retried
// from River's tools, see operator_retry.go). Like any turn that parks a
// message, it counts as an attempt.
func (w *worker) conflict(job *river.Job[jobArgs], win record) turn {
	d := Delivery{ID: job.Args.messageID(job.ID), Name: job.Args.Name, Key: job.Args.Key,
		Attempt: job.Attempt - win.Base, Reason: ReasonKeyConflict}
	win.Outcome = string(ReasonKeyConflict)
	win.Error = fmt.Sprintf("message %d was enqueued under this key before, with other contents", job.Args.Conflict)
	return turn{d: d, v: refused, rec: win}
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
