package trace

import (
	"encoding/json"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// TB is what Start, Seed and Require need of a test: testing.TB has it.
// (The package does not import testing, which the stores link.)
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// Recorder collects the steps that the stores of the process emit while
// it is started. It is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	steps []Step
	// deliveries are the outbox's steps (EmitDelivery).
	deliveries []Delivery
	file       *os.File      // FromEnv's: steps go to the file instead
	enc        *json.Encoder // on file
}

var (
	active    atomic.Int32 // how many recorders are started
	recorders sync.Map     // *Recorder -> struct{}
)

// Start starts a Recorder that gets every step emitted until tb ends. Steps
// of other tests running in parallel come too: their scopes differ (each
// test has its schema or store), and Check checks each scope apart.
func Start(tb TB) *Recorder {
	tb.Helper()
	r := &Recorder{}
	recorders.Store(r, struct{}{})
	active.Add(1)
	tb.Cleanup(func() {
		recorders.Delete(r)
		active.Add(-1)
	})
	return r
}

// On reports whether a Recorder is started: a store builds a step only
// then.
func On() bool { return active.Load() > 0 }

// Emit hands s to every started Recorder; it does nothing when none is.
func Emit(s Step) {
	if active.Load() == 0 {
		return
	}
	recorders.Range(func(k, _ any) bool {
		r := k.(*Recorder)
		r.mu.Lock()
		if r.enc != nil {
			_ = r.enc.Encode(line{Step: &s}) // one write per line
		} else {
			r.steps = append(r.steps, s)
		}
		r.mu.Unlock()
		return true
	})
}

// Now is the time a store stamps a step with: the local monotonic clock,
// which every store of the process shares.
func Now() time.Time { return time.Now() }

// Steps returns a copy of the steps recorded so far, in the order they
// were emitted.
func (r *Recorder) Steps() []Step {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Step(nil), r.steps...)
}

// Require checks the steps recorded so far (Check) and fails tb with the
// first violation, or when fewer than min steps were recorded (a run that
// recorded nothing checked nothing).
func (r *Recorder) Require(tb TB, min int) {
	tb.Helper()
	steps := r.Steps()
	if len(steps) < min {
		tb.Fatalf("trace: %d steps recorded, want at least %d: the stores did not trace this run", len(steps), min)
	}
	if v := Check(steps); v != nil {
		tb.Fatalf("trace: %v", v)
	}
	ds := r.Deliveries()
	if err := CheckOutbox(ds); err != nil {
		tb.Fatalf("trace: %v", err)
	}
	tb.Logf("trace: %d steps over %d scopes and %d outbox steps, each allowed by the model", len(steps), len(byScope(steps)), len(ds))
}

// Begin is the start of a step a store is about to take: Now while a
// Recorder is started, and the zero time (no clock read) otherwise.
func Begin() time.Time {
	if active.Load() == 0 {
		return time.Time{}
	}
	return time.Now()
}
