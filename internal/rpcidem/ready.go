package rpcidem

import (
	"time"

	"github.com/idemkit/idem"
)

// defaultMaxWait is idem.Config.MaxWait's zero value, as its doc states it.
const defaultMaxWait = 30 * time.Second

// ReadyWait is how long one call of a client interceptor waits, in all,
// for its target to be ready, besides its deadline: cfg.MaxWait (zero:
// 30 s, as for the waits of idem's client), or -1 for no bound but the
// deadline (a negative MaxWait); 0 when cfg.FailFast, which waits for
// nothing.
func ReadyWait(cfg idem.Config) time.Duration {
	switch {
	case cfg.FailFast:
		return 0
	case cfg.MaxWait < 0:
		return -1
	case cfg.MaxWait == 0:
		return defaultMaxWait
	}
	return cfg.MaxWait
}

// Waited is what one call has waited for its target, against its bound.
// It is not safe for concurrent use: a call's attempts run one at a time.
type Waited struct {
	Bound time.Duration // ReadyWait's
	spent time.Duration
}

// Left is how long the call may still wait, -1 for no bound; 0 when it
// may not.
func (w *Waited) Left() time.Duration {
	if w.Bound < 0 {
		return -1
	}
	return max(0, w.Bound-w.spent)
}

// Add counts d as waited.
func (w *Waited) Add(d time.Duration) { w.spent += d }
