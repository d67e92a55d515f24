package outbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// decide applies the parking rules to a classified delivery: the n-th
// delivery since the retry window opened at since. It returns the reason
// to park (none for a delivery, or a retry) and the wait before the next
// delivery.
func (s *settings) decide(r result, n int, since time.Time) (Reason, time.Duration) {
	switch r.verdict {
	case delivered:
		return "", 0
	case refused:
		return ReasonRefused, 0
	}
	wait := backoff(n, s.MinBackoff, s.MaxBackoff, r.retryAfter, s.random())
	if r.verdict == deferred {
		wait = s.deferral()
	}
	switch {
	case r.verdict == retry && n >= s.MaxAttempts:
		return ReasonAttempts, 0
	case s.now().Add(wait).Sub(since) >= s.MaxAge:
		return ReasonAge, 0
	}
	return "", wait
}

// deferral is the wait after a deferred delivery: about a second (a
// breaker stays open for seconds), within the backoff bounds.
func (s *settings) deferral() time.Duration {
	ceil := min(max(s.MinBackoff, time.Second), s.MaxBackoff)
	return ceil/2 + time.Duration(s.random()*float64(ceil/2))
}

// overdue returns why a message must be parked before its n-th delivery
// (after deliveries abandoned by dispatchers that died), or "".
func (s *settings) overdue(n int, since time.Time) Reason {
	switch {
	case n > s.MaxAttempts:
		return ReasonAttempts
	case s.now().Sub(since) >= s.MaxAge:
		return ReasonAge
	}
	return ""
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
}

// newRecord records r, parked for reason (or not, ""), in the window w.
func newRecord(r result, reason Reason, w record) record {
	rec := record{Outcome: r.verdict.String(), Status: r.status, Header: r.header, Body: r.body, Since: w.Since, Base: w.Base}
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
}

// decodeRecord reads the record kept in a River job's metadata.
func decodeRecord(metadata []byte) record {
	var m struct {
		Output record `json:"output"`
	}
	_ = json.Unmarshal(metadata, &m) // a job without an output has the zero record
	return m.Output
}
