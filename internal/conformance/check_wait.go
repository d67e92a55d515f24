package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// Bounds of the pause between two requests of awaitReplay: the first
// pause, and the longest (a longer Retry-After is cut to it).
const (
	firstPause = 100 * time.Millisecond
	maxPause   = 2 * time.Second
)

// awaitReplay sends key and body again, after duplicates of them were told
// to wait, until the key replays won, the response of the request that
// ran: a wait must end. It returns the exchanges to show and "" when the
// key replayed within Config.WaitTimeout, else a sentence that says what
// came instead. It pauses between requests as Retry-After says (at most
// maxPause), else 100 ms, doubling.
func (r *runner) awaitReplay(ctx context.Context, key string, body []byte, won exchange) ([]exchange, string) {
	deadline := time.Now().Add(r.cfg.WaitTimeout)
	pause := firstPause
	for n := 1; ; n++ {
		x := r.send(ctx, call{note: fmt.Sprintf("the key again (%d), after duplicates were told to wait", n), key: key, body: body})
		switch {
		case x.sameAs(won) || x.ok2xx() && r.sameID(x, won):
			return nil, ""
		case x.ok2xx():
			return []exchange{won, x}, fmt.Sprintf("the key then got another %d response than the one that ran: the operation ran again", x.status)
		case x.err != nil || !waitStatuses[x.status]:
			return []exchange{won, x}, fmt.Sprintf("the key then got %s, want a replay of the %d that ran", x.outcome(), won.status)
		}
		wait := pause
		if ra, ok := wire.ParseRetryAfter(x.header.Get("Retry-After"), time.Now()); ok {
			wait = ra
		}
		wait = min(wait, maxPause)
		if time.Until(deadline) < wait || sleep(ctx, wait) != nil {
			return []exchange{won, x}, fmt.Sprintf("the key never replayed: %d requests over %s (-wait-timeout) all got %d: a duplicate told to wait must be able to get the result once the request that ran is done (a lock never released?)",
				n, r.cfg.WaitTimeout, x.status)
		}
		pause = min(2*pause, maxPause)
	}
}

// sameID reports whether x and y name the same resource by IDField.
func (r *runner) sameID(x, y exchange) bool {
	idx, okx := r.id(x)
	idy, oky := r.id(y)
	return okx && oky && idx == idy
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
