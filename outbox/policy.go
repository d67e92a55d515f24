package outbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idem/internal/trace"
)

// decide applies the parking rules to a classified delivery, the n-th of
// the retry window w (its record, with this delivery in it: see tried). It
// returns the reason to park (none for a delivery, or a retry) and the
// wait before the next delivery. A delivery its client refused counts as
// a failed one; since a dead destination's messages wait for their turns
// at its pace (see refusals), it also parks the message once the window
// (from the enqueue or the last re-drive, its waits in the queue
// included) is as old as MaxAttempts failed deliveries can make it
// (span).
func (s *settings) decide(r result, n int, w record) (Reason, time.Duration) {
	switch r.verdict {
	case delivered:
		return "", 0
	case refused:
		return ReasonRefused, 0
	}
	now := s.now()
	wait := backoff(n, s.MinBackoff, s.MaxBackoff, r.retryAfter, s.random())
	switch {
	case n >= s.MaxAttempts, r.verdict == localRefusal && now.Sub(w.Since) >= s.span:
		return ReasonAttempts, 0
	case !w.First.IsZero() && now.Add(wait).Sub(w.First) >= s.KeyRetention && !trace.Seeded(trace.OutboxIgnoresRetention):
		return ReasonRetention, 0
	case now.Add(wait).Sub(w.Since) >= s.MaxAge:
		return ReasonAge, 0
	}
	return "", wait
}

// overdue returns why a message must be parked before its n-th delivery
// of the window w (after deliveries abandoned by dispatchers that died,
// or put off), or "".
func (s *settings) overdue(n int, w record) Reason {
	now := s.now()
	switch {
	case n > s.MaxAttempts:
		return ReasonAttempts
	case !w.First.IsZero() && now.Sub(w.First) >= s.KeyRetention && !trace.Seeded(trace.OutboxIgnoresRetention):
		return ReasonRetention
	case now.Sub(w.Since) >= s.MaxAge:
		return ReasonAge
	}
	return ""
}

// span is the time attempts deliveries imply: the longest that the
// backoffs between them, from minB doubling up to maxB, add up to.
func span(attempts int, minB, maxB time.Duration) time.Duration {
	total, step := time.Duration(0), minB
	for range attempts - 1 {
		total += min(step, maxB)
		if step < maxB {
			step *= 2
		}
	}
	return total
}

// record is what the outbox keeps of a message's last delivery and of its
// retry window; parked messages show it.
type record struct {
	Outcome string      `json:"outcome,omitempty"` // the last verdict, or the park reason
	Status  int         `json:"status,omitempty"`
	Header  http.Header `json:"header,omitempty"`
	Body    []byte      `json:"body,omitempty"`
	Error   string      `json:"error,omitempty"`
	// Since opens the retry window (zero: the enqueue); Base is the
	// number of deliveries made before it.
	Since time.Time `json:"since,omitzero"`
	Base  int       `json:"base,omitempty"`
	// First is when the first delivery that may have taken effect
	// downstream started, in any window (zero: none did): the
	// downstream's retention of the key runs from then.
	First time.Time `json:"first,omitzero"`
}

// tried returns the window w with a delivery that started at started and
// got r.
func (w record) tried(r result, started time.Time) record {
	if w.First.IsZero() && r.acted {
		w.First = started
	}
	return w
}

// newRecord records r, parked for reason (or not, ""), in the window w.
func newRecord(r result, reason Reason, w record) record {
	rec := record{Outcome: r.verdict.String(), Status: r.status, Header: r.header, Body: r.body,
		Since: w.Since, Base: w.Base, First: w.First}
	if reason != "" {
		rec.Outcome = string(reason)
	}
	if r.err != nil {
		rec.Error = cut(r.err.Error(), keptErrorBytes)
	}
	return rec
}

// keptErrorBytes bounds the error a record keeps.
const keptErrorBytes = 1 << 10

// cut returns s cut to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// parkError is the error a parked message ends with.
type parkError struct {
	reason Reason
	rec    record
}

func (e *parkError) Error() string {
	msg := fmt.Sprintf("outbox: parked (%s)", e.reason)
	if e.rec.Status != 0 {
		msg += fmt.Sprintf(", last status %d", e.rec.Status)
	}
	if e.rec.Error != "" {
		msg += ": " + e.rec.Error
	}
	return msg
}

// retryError is the error of a delivery that will be retried.
type retryError struct{ rec record }

func (e *retryError) Error() string {
	if e.rec.Error != "" {
		return "outbox: delivery failed, will retry: " + e.rec.Error
	}
	return fmt.Sprintf("outbox: delivery failed with status %d, will retry", e.rec.Status)
}

// ParkedMessage is a parked message with what its last delivery got.
type ParkedMessage struct {
	ID      int64
	Message Message
	Reason  Reason
	// Attempts counts its deliveries since it was enqueued or last re-driven.
	Attempts int
	// Status, Header and Body are the last response, when one arrived: of
	// its headers, Content-Type, Retry-After, Location, WWW-Authenticate
	// and Date first, then the others in name order, each value whole, up
	// to 64 values and 4 KiB in all; of its body, the first 4 KiB. Err is
	// the last error (its first KiB), "" when none.
	Status     int
	Header     http.Header
	Body       []byte
	Err        string
	EnqueuedAt time.Time
	ParkedAt   time.Time
	// FirstAttempt is when the first delivery that may have taken effect
	// downstream started (it got a 2xx, a 5xx, a 409 key-in-flight, or no
	// complete response), zero when none did; re-drives do not reset it.
	// The downstream deduplicates by the message's key for its key
	// retention from then ([Config.KeyRetention]), and no longer after.
	// RedriveBy is FirstAttempt plus Config.KeyRetention (zero when
	// FirstAttempt is): [Outbox.Redrive] refuses the message after it, with
	// [ErrPastRetention], since a delivery then could run the operation
	// twice.
	FirstAttempt, RedriveBy time.Time
}

// parked returns p with its first attempt and the time Redrive refuses
// it after, from the record rec.
func (s *settings) parked(p ParkedMessage, rec record) ParkedMessage {
	p.FirstAttempt = rec.First
	if !rec.First.IsZero() {
		p.RedriveBy = rec.First.Add(s.KeyRetention)
	}
	return p
}

// redriven returns the record of a parked message re-driven at now after
// attempts deliveries: a new retry window. It returns ErrPastRetention
// when the downstream may have forgotten the key, unless force, which
// forgets the first attempt (the caller takes the retention as starting
// anew).
func (s *settings) redriven(id int64, rec record, attempts int, force bool) (record, error) {
	now := s.now()
	mutant := trace.Seeded(trace.OutboxRedrivePastRetention)
	if !force && !mutant && !rec.First.IsZero() && now.Sub(rec.First) >= s.KeyRetention {
		s.traceRedrive(id, now, "redrive-refused", force)
		return rec, ErrPastRetention
	}
	s.traceRedrive(id, now, "redrive", force)
	if force || mutant {
		rec.First = time.Time{}
	}
	rec.Since, rec.Base = now, attempts
	return rec, nil
}

// decodeRecord reads the record kept in a River job's metadata.
func decodeRecord(metadata []byte) record {
	var m struct {
		Output record `json:"output"`
	}
	_ = json.Unmarshal(metadata, &m) // a job without an output has the zero record
	return m.Output
}
