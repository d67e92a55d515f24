package outbox

import (
	"fmt"
	"time"

	"github.com/idemkit/idem/internal/trace"
)

// The outbox's steps for internal/trace (outbox.pml), emitted only while
// a test records: each delivery with the time the overdue rule judged
// it, and each re-drive, by the outbox's own clock.

// traceAt is the time a dispatch is judged, read only while a test
// records.
func (s *settings) traceAt() time.Time {
	if !trace.On() {
		return time.Time{}
	}
	return s.now()
}

// traceDelivery emits a delivery of message id under key.
func (s *settings) traceDelivery(id int64, key string, at, started time.Time, acted bool) {
	if trace.On() {
		trace.EmitDelivery(trace.Delivery{Message: s.traceID(id), Op: "deliver", Key: key, At: at, Started: started,
			Acted: acted, Retention: s.KeyRetention})
	}
}

// traceRedrive emits a re-drive of message id, or its refusal.
func (s *settings) traceRedrive(id int64, at time.Time, op string, force bool) {
	if trace.On() {
		trace.EmitDelivery(trace.Delivery{Message: s.traceID(id), Op: op, At: at, Forced: force, Retention: s.KeyRetention})
	}
}

func (s *settings) traceID(id int64) string { return fmt.Sprintf("%s:%d", s.where, id) }

// mutantKey is msg, or, with trace.OutboxRedriveNewKey seeded and msg
// re-driven, a copy under a new key.
func (s *settings) mutantKey(msg *Message, win record) *Message {
	if win.Base == 0 || !trace.Seeded(trace.OutboxRedriveNewKey) {
		return msg
	}
	m := *msg
	m.Key += "-redriven"
	return &m
}
