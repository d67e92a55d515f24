package trace

import (
	"fmt"
	"sort"
	"time"
)

// Delivery is a step of an outbox message's lifecycle (outbox.pml): a
// delivery, or a re-drive, as the outbox performed it, by its own clock
// (the one its retention rules read).
type Delivery struct {
	// Message identifies the message: its outbox's database or memory
	// queue, and its ID.
	Message string
	// Op is "deliver", "redrive" or "redrive-refused".
	Op string
	// Key is the Idempotency-Key a delivery carried.
	Key string
	// At is when the outbox judged the step (settings.overdue, or
	// settings.redriven); Started is when a delivery began, and Acted
	// whether it may have taken effect downstream.
	At, Started time.Time
	Acted       bool
	// Forced is a re-drive past the retention that the caller chose
	// (RedrivePastRetention).
	Forced bool
	// Retention is the downstream's key retention (Config.KeyRetention).
	Retention time.Duration
}

// EmitDelivery hands d to every started Recorder; it does nothing when
// none is.
func EmitDelivery(d Delivery) {
	if active.Load() == 0 {
		return
	}
	recorders.Range(func(k, _ any) bool {
		r := k.(*Recorder)
		r.mu.Lock()
		if r.enc != nil {
			_ = r.enc.Encode(line{Delivery: &d})
		} else {
			r.deliveries = append(r.deliveries, d)
		}
		r.mu.Unlock()
		return true
	})
}

// Deliveries returns a copy of the outbox steps recorded so far.
func (r *Recorder) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.deliveries...)
}

// CheckOutbox checks each message's steps, in the order of At, against
// outbox.pml's guards, and returns the first step they refuse: every
// delivery carries the key of the message's first (key); a delivery is
// sent before the key retention, counted from the first delivery that may
// have acted, has passed (OVERDUE, PAST_RETENTION); a re-drive past it is
// refused unless forced (MAY_REDRIVE), and a forced one starts the count
// anew. The count is the checker's own, from the deliveries it saw: a
// store of the outbox that forgot it shows.
func CheckOutbox(ds []Delivery) error {
	byMsg := map[string][]Delivery{}
	for _, d := range ds {
		byMsg[d.Message] = append(byMsg[d.Message], d)
	}
	for id, steps := range byMsg {
		sort.SliceStable(steps, func(i, j int) bool { return steps[i].At.Before(steps[j].At) })
		if err := checkMessage(steps); err != nil {
			return fmt.Errorf("outbox message %s: %w\nsteps: %+v", id, err, steps)
		}
	}
	return nil
}

func checkMessage(steps []Delivery) error {
	var key string
	var first time.Time
	for i, d := range steps {
		past := !first.IsZero() && d.At.Sub(first) >= d.Retention
		switch d.Op {
		case "deliver":
			if key == "" {
				key = d.Key
			}
			if d.Key != key {
				return fmt.Errorf("step %d: a delivery under key %q, the message's is %q", i, d.Key, key)
			}
			if past {
				return fmt.Errorf("step %d: a delivery %s after the first that may have acted, past the key retention %s",
					i, d.At.Sub(first), d.Retention)
			}
			if first.IsZero() && d.Acted {
				first = d.Started
			}
		case "redrive":
			if past && !d.Forced {
				return fmt.Errorf("step %d: a re-drive %s after the first delivery that may have acted, past the key retention %s",
					i, d.At.Sub(first), d.Retention)
			}
			if d.Forced {
				first = time.Time{}
			}
		}
	}
	return nil
}
