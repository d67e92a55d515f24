package outbox

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"time"
)

// slowDelivery is the delivery time above which a destination is slow: a
// worker it holds that long is missed by the others.
const slowDelivery = 100 * time.Millisecond

// sharedWithin is how recently another destination must have had a
// delivery in flight for a destination whose deliveries are refused to
// leave it a quarter of the workers (see bound).
const sharedWithin = time.Minute

// maxDestinations bounds the destinations a share remembers; idle ones
// are forgotten beyond it.
const maxDestinations = 1024

// share is how the destinations of one queue share the workers that a
// dispatcher gives it (see the package doc, "Sharing the workers"). A
// destination is the scheme and host (with its port) of a message's URL.
// A fast destination, whose deliveries end within slowDelivery, may use
// every worker, and so may one alone in the queue (see bound). A slow one,
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
	changed  chan struct{}           // closed, and replaced, when one ends
	known    bool                    // a delivery sent to it ended
	avg      time.Duration           // moving average of those deliveries' times
	next     time.Time               // the end of its put-off schedule
	idle     time.Time               // when its last delivery ended
	refusing bool                    // the client refused a delivery since the last success (see ticket.refused)
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

// ticket is a delivery admitted by take: begin marks its start (it may
// wait for a worker first), end its end, cancel one that did not start.
type ticket struct {
	s     *share
	d     *destination
	start *time.Time
}

func (t ticket) begin() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	*t.start = t.s.now()
}

// take admits a delivery to dest, or returns the time to put the message
// off when dest is at its bound. While dest is not known and its
// deliveries in flight are younger than slowDelivery, take waits (within
// ctx) for one of them to end, or for them to reach slowDelivery: they may
// be about to end fast (dest is then fast, and not bound), and a message
// put off waits for its dispatcher's next fetch.
func (s *share) take(ctx context.Context, dest string) (t ticket, wait time.Duration, ok bool) {
	for {
		s.mu.Lock()
		now := s.now()
		d := s.dests[dest]
		if d == nil {
			s.prune(now)
			d = &destination{inflight: map[*time.Time]struct{}{}, changed: make(chan struct{})}
			s.dests[dest] = d
		}
		if d.fast(now) || len(d.inflight) < s.bound(dest, now) {
			start := now
			d.inflight[&start] = struct{}{}
			s.mu.Unlock()
			return ticket{s, d, &start}, 0, true
		}
		young := d.youngUnknown(now)
		if young <= 0 {
			wait := s.putOff(d, dest, now)
			s.mu.Unlock()
			return ticket{}, wait, false
		}
		changed := d.changed
		s.mu.Unlock()
		timer := time.NewTimer(young)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ticket{}, 0, false
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// bound is how many deliveries a slow destination dest may have in
// flight: three quarters of the workers split among the slow destinations
// with deliveries in flight; or every worker when its client refuses to
// send to it (breaker open) and it is alone (no other destination had a
// delivery in flight in the last sharedWithin), since its turns then end
// at the dispatcher's pace (see refusals) and the queue fetches its
// messages no faster: a quarter kept for others that are not there would
// only pass its backlog at full speed, each message put off.
func (s *share) bound(dest string, now time.Time) int {
	n, alone := 1, true
	for name, d := range s.dests {
		if name == dest {
			continue
		}
		if len(d.inflight) > 0 || now.Sub(d.idle) < sharedWithin {
			alone = false
		}
		if len(d.inflight) > 0 && !d.fast(now) {
			n++
		}
	}
	if alone && s.dests[dest].refusing {
		return s.workers
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

// end records the end of t's delivery (sent false when the client sent
// nothing: it says nothing of the destination's speed).
func (t ticket) end(sent bool) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	now := t.s.now()
	d := t.d
	delete(d.inflight, t.start)
	close(d.changed)
	d.changed, d.idle = make(chan struct{}), now
	if !sent {
		return
	}
	took := now.Sub(*t.start)
	if !d.known {
		d.known, d.avg = true, took
	} else {
		d.avg = (d.avg*3 + took) / 4
	}
}

// refused records that the client refused t's delivery (its host's
// breaker open): until a delivery to it succeeds (delivered), the
// destination may take every worker when it is alone (see bound). A
// failed one does not end it: the breaker's probes are sent and fail
// while the host is down.
func (t ticket) refused() { t.setRefusing(true) }

// delivered records that t's delivery succeeded.
func (t ticket) delivered() { t.setRefusing(false) }

func (t ticket) setRefusing(on bool) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.d.refusing = on
}

// cancel forgets t, a delivery that did not start.
func (t ticket) cancel() { t.end(false) }

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

// youngUnknown returns how long until d's oldest delivery in flight
// reaches slowDelivery, when no delivery to d has ended yet; <= 0 when
// one has, or none is that young.
func (d *destination) youngUnknown(now time.Time) time.Duration {
	if d.known || len(d.inflight) == 0 {
		return 0
	}
	oldest := time.Duration(0)
	for start := range d.inflight {
		oldest = max(oldest, now.Sub(*start))
	}
	return slowDelivery - oldest
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
