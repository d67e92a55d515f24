package idem

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// latencies keeps the latest latencies of one host, and a quantile of them.
// It is safe for concurrent use.
type latencies struct {
	q     float64 // the quantile, in (0, 1)
	min   int     // samples needed before the quantile is used
	every int     // the quantile is recomputed every this many samples

	mu      sync.Mutex
	ring    []time.Duration // the latest len(ring) samples
	added   int             // samples added, ever
	scratch []time.Duration // a sorted copy of the ring, reused

	ready atomic.Bool  // min samples were seen
	value atomic.Int64 // the quantile, in ns, when ready
}

func newLatencies(q float64, window, minSamples int) *latencies {
	return &latencies{
		q: q, min: minSamples, every: max(1, window/16),
		ring: make([]time.Duration, window), scratch: make([]time.Duration, 0, window),
	}
}

// add records a latency. The quantile is recomputed when the minimum of
// samples is reached and every window/16 samples after, so that its cost
// (a sort of the window) is spread over many calls.
func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.added%len(l.ring)] = d
	l.added++
	if l.added < l.min || (l.added-l.min)%l.every != 0 {
		return
	}
	l.value.Store(int64(l.quantile()))
	l.ready.Store(true)
}

// quantile returns the nearest-rank quantile of the window's samples.
func (l *latencies) quantile() time.Duration {
	n := min(l.added, len(l.ring))
	s := append(l.scratch[:0], l.ring[:n]...)
	slices.Sort(s)
	i := int(math.Ceil(l.q*float64(n))) - 1
	return s[min(max(i, 0), n-1)]
}

// get returns the quantile, and false until there were enough samples.
func (l *latencies) get() (time.Duration, bool) {
	if !l.ready.Load() {
		return 0, false
	}
	return time.Duration(l.value.Load()), true
}
