package idem

import (
	"net/url"
	"sync"
	"sync/atomic"
)

// hedgeHost is what the hedging policy keeps of one host: the attempts of
// races in flight to it, how many of them are hedges, and, for a
// percentile delay, its recent latencies.
type hedgeHost struct {
	latencies *latencies   // nil for a fixed delay
	attempts  atomic.Int64 // attempts of races in flight, hedges included
	hedges    atomic.Int64 // hedges in flight, or admitted and about to be
}

// admitHedge reserves a hedge when the hedges in flight, this one
// included, are at most floor, or stay within share of the attempts in
// flight (this one included). A hedge admitted must be followed by
// started or by release. A hedge admitted and released at the same time
// may make it deny one that the bound would allow.
func (h *hedgeHost) admitHedge(share float64, floor int) bool {
	for {
		cur := h.hedges.Load()
		n := cur + 1
		// The 1e-9 keeps a share that float64 cannot hold exactly (0.29 x 100
		// is 28.999...) from refusing the hedge it allows.
		if n > int64(floor) && float64(n) > share*float64(h.attempts.Load()+1)+1e-9 {
			return false
		}
		if h.hedges.CompareAndSwap(cur, n) {
			return true
		}
	}
}

// release gives back a hedge admitted but not sent.
func (h *hedgeHost) release() { h.hedges.Add(-1) }

// started counts an attempt of a race in flight (a hedge was counted by
// admitHedge already).
func (h *hedgeHost) started() { h.attempts.Add(1) }

// ended counts an attempt of a race, or a hedge, out of flight: the
// attempt first, so that a bound read meanwhile errs on the side of fewer
// hedges.
func (h *hedgeHost) ended(hedge bool) {
	h.attempts.Add(-1)
	if hedge {
		h.hedges.Add(-1)
	}
}

// hedgeHosts holds the hedgeHost of each host, at most max of them. It is
// safe for concurrent use.
type hedgeHosts struct {
	q                  float64 // the percentile, 0 for a fixed delay
	window, minSamples int
	max                int

	mu     sync.Mutex
	byHost map[string]*hedgeHost
}

// lookup returns the hedgeHost of u's host (its breaker's key), creating
// it when needed. Beyond max hosts one is forgotten, one with no attempt
// in flight when there is one: a host that is in use soon has a window
// again, and a client that talks to many hosts does not grow without
// limit. A forgotten host's calls in flight keep the hedgeHost they hold
// (for their retries too); the host's next calls start anew.
func (h *hedgeHosts) lookup(u *url.URL) *hedgeHost {
	var buf [64]byte
	key := appendHostKey(buf[:0], u)
	h.mu.Lock()
	defer h.mu.Unlock()
	if host, ok := h.byHost[string(key)]; ok {
		return host
	}
	if len(h.byHost) >= h.max {
		h.forgetOne()
	}
	host := &hedgeHost{}
	if h.q > 0 {
		host.latencies = newLatencies(h.q, h.window, h.minSamples)
	}
	h.byHost[string(key)] = host
	return host
}

// forgetOne forgets a host with no attempt in flight, or else any host.
// h.mu must be held.
func (h *hedgeHosts) forgetOne() {
	victim := ""
	for k, host := range h.byHost {
		victim = k
		if host.attempts.Load() == 0 {
			break
		}
	}
	delete(h.byHost, victim)
}

// latenciesOrNil returns the host's latencies, nil for a nil host or a
// fixed delay.
func (h *hedgeHost) latenciesOrNil() *latencies {
	if h == nil {
		return nil
	}
	return h.latencies
}
