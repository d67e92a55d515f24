package connectidem

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"time"
)

// unreachable reports whether err is a call that failed because its
// target could not be reached: a dial refused or failing, or its name not
// resolved (by the error's type). Nothing was sent, but for one case that
// is safe: net/http re-dials by itself only for a request it may re-send
// (a keyed one, or an idempotent method), after a reused connection
// broke, so a dial error that follows a send is that of a request whose
// key (or method) makes sending it again harmless.
func unreachable(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op == "dial"
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// awaitTarget waits before the call dials its target again after the n-th
// dial in a row failed (n from 0), as gRPC's wait-for-ready waits for a
// channel: for Config.Backoff's wait, within ctx and what is left of the
// call's wait bound; it returns the wait. It returns ctx's error when ctx
// ended first, and false, without waiting, when the call may wait no
// longer or the deadline comes before the wait's end (the attempt then
// ends with the failed dial, which idem's client judges as any answer:
// its own backoff then fails the call with idem.ErrDeadline).
func (c *call) awaitTarget(ctx context.Context, n int, prev time.Duration) (time.Duration, bool, error) {
	left := c.waited.Left()
	if left == 0 {
		return 0, false, nil
	}
	d := c.backoff.Delay(n, prev, c.rand())
	if left > 0 && d > left {
		d = left
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return 0, false, nil // a dial after the deadline would be of no use: give up now
	}
	t := time.NewTimer(d)
	defer t.Stop()
	c.waited.Add(d)
	select {
	case <-ctx.Done():
		return d, false, ctx.Err()
	case <-t.C:
	}
	return d, true, nil
}

// realRand is the randomness of the waits' jitter.
func realRand() float64 { return rand.Float64() }
