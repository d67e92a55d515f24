package outbox

import (
	"net/url"
	"strings"
	"sync"
	"time"
)

// slowDelivery is the delivery time above which a destination is slow: a
// worker it holds that long is missed by the others.
const slowDelivery = 100 * time.Millisecond

// maxDestinations bounds the destinations a share remembers; idle ones
// are forgotten beyond it.
const maxDestinations = 1024

// share is how the destinations of one dispatcher share its workers (see
// the package doc, "Sharing the workers"). A destination is the scheme and
// host (with its port) of a message's URL. A fast destination, whose
// deliveries end within slowDelivery, may use every worker. A slow one,
// or one not known yet, may have at most (Workers - Workers/4) / n
// deliveries in flight (at least 1), n being the number of such
// destinations with deliveries in flight: whatever it does, a quarter of
// the workers stays for the others, and slow destinations split the rest.
// A message whose destination is at its bound is put off: take says how
// long, from the destination's schedule, spaced by its delivery time over
// its bound, so that put-off messages come back about as fast as it takes
// them. It is safe for concurrent use.
type share struct {
	mu      sync.Mutex
	workers int
	maxWait time.Duration // the longest a message is put off
	now     func() time.Time
	random  func() float64
	dests   map[string]*destination
}

// destination is what a share knows of one destination.
type destination struct {
	inflight map[*time.Time]struct{} // the start of each delivery in flight
	known    bool                    // a delivery sent to it ended
	avg      time.Duration           // moving average of those deliveries' times
	next     time.Time               // the end of its put-off schedule
	idle     time.Time               // when its last delivery ended
}

func newShare(workers int, maxWait time.Duration, now func() time.Time, random func() float64) *share {
	return &share{workers: workers, maxWait: maxWait, now: now, random: random, dests: map[string]*destination{}}
}

// destinationOf names the destination of a message's URL.
func destinationOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// take admits a delivery to dest, and returns the function to call when
// it ends (sent false when the client sent nothing: the delivery says
// nothing of the destination's speed); or, when dest is at its bound, the
// time to put the message off.
func (s *share) take(dest string) (done func(sent bool), wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	d := s.dests[dest]
	if d == nil {
		s.prune(now)
		d = &destination{inflight: map[*time.Time]struct{}{}}
		s.dests[dest] = d
	}
	if !d.fast(now) && len(d.inflight) >= s.bound(dest, now) {
		return nil, s.putOff(d, dest, now)
	}
	start := now
	d.inflight[&start] = struct{}{}
	return func(sent bool) { s.end(d, &start, sent) }, 0
}

// bound is how many deliveries a slow destination dest may have in flight.
func (s *share) bound(dest string, now time.Time) int {
	n := 1
	for name, d := range s.dests {
		if name != dest && len(d.inflight) > 0 && !d.fast(now) {
			n++
		}
	}
	return max(1, (s.workers-s.workers/4)/n)
}

// putOff books the next place of d's schedule and returns the wait until
// it, at most maxWait.
func (s *share) putOff(d *destination, dest string, now time.Time) time.Duration {
	took := d.avg
	for start := range d.inflight {
		took = max(took, now.Sub(*start)) // a delivery that has not ended yet
	}
	step := max(took, slowDelivery) / time.Duration(s.bound(dest, now))
	d.next = later(d.next, now).Add(step)
	wait := d.next.Sub(now) - time.Duration(s.random()*float64(step))
	return min(max(wait, 0), s.maxWait)
}

// end records the end of the delivery that started at start.
func (s *share) end(d *destination, start *time.Time, sent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	delete(d.inflight, start)
	d.idle = now
	if !sent {
		return
	}
	took := now.Sub(*start)
	if !d.known {
		d.known, d.avg = true, took
	} else {
		d.avg = (d.avg*3 + took) / 4
	}
}

// fast reports whether d's deliveries end within slowDelivery: those
// that ended, on average, and every one in flight so far.
func (d *destination) fast(now time.Time) bool {
	if !d.known || d.avg >= slowDelivery {
		return false
	}
	for start := range d.inflight {
		if now.Sub(*start) >= slowDelivery {
			return false
		}
	}
	return true
}

// prune forgets idle destinations, beyond maxDestinations, whose
// schedule is over.
func (s *share) prune(now time.Time) {
	if len(s.dests) < maxDestinations {
		return
	}
	for name, d := range s.dests {
		if len(d.inflight) == 0 && !d.next.After(now) && now.Sub(d.idle) > time.Minute {
			delete(s.dests, name)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
