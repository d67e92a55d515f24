package outbox

import (
	"sync"
	"time"
)

// refusalRate is how many turns whose delivery the client refused
// (circuit open) a dispatcher ends per second, at most. Such a turn holds
// its worker until its place in this pace (see settings.hold), and each
// queue fetches no more messages than it has workers: so a dead
// destination's messages are fetched at this pace too, and cost River at
// most three row updates each (the fetch, the turn's end, and River's
// scheduler making the message available after a wait over 5 s), however
// many are waiting.
const refusalRate = 15

// recheck is how often a held turn asks its client again: one of them is
// the probe that the breaker lets through when its open period ends.
const recheck = 250 * time.Millisecond

// refusals paces the ends of the turns of one dispatcher whose delivery
// its idem client refused (see refusalRate), and remembers the messages
// such a turn left waiting in the queue, by destination: when a delivery
// to the destination succeeds again, release hands them back so that they
// are made due at once, and wakes the turns held for it. It is safe for
// concurrent use.
type refusals struct {
	mu     sync.Mutex
	now    func() time.Time
	random func() float64 // in [0, 1)
	due    map[int64]int  // unix second -> turns ending in it
	floor  int64          // seconds before it are forgotten
	held   map[string]map[int64]struct{}
	up     map[string]chan struct{} // closed when the destination takes a delivery
}

func newRefusals(now func() time.Time, random func() float64) *refusals {
	return &refusals{now: now, random: random, due: map[int64]int{},
		held: map[string]map[int64]struct{}{}, up: map[string]chan struct{}{}}
}

// pace books the end of a refused turn in the first second from now that
// has fewer than refusalRate, and returns when it is: now when the
// current second has room, else a random point of the second booked.
func (p *refusals) pace() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.forget(now.Unix())
	sec := now.Unix()
	for p.due[sec] >= refusalRate {
		sec++
	}
	p.due[sec]++
	if sec == now.Unix() {
		return now
	}
	return time.Unix(sec, 0).Add(time.Duration(p.random() * float64(time.Second)))
}

// forget drops the counts of the seconds before sec.
func (p *refusals) forget(sec int64) {
	if p.floor == 0 {
		p.floor = sec
	}
	for ; p.floor < sec && len(p.due) > 0; p.floor++ {
		delete(p.due, p.floor)
	}
	p.floor = max(p.floor, sec)
}

// recovered returns a channel closed when a delivery to dest succeeds (release).
func (p *refusals) recovered(dest string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := p.up[dest]
	if ch == nil {
		ch = make(chan struct{})
		p.up[dest] = ch
	}
	return ch
}

// hold remembers message id of dest, refused and waiting in the queue,
// and reports whether it did. since is the channel of recovered taken
// before the refused delivery began: when it is closed, dest took a
// delivery since then, and released what was held before this message
// was; hold then remembers nothing and returns false, and the caller
// makes the message due at once, as release would have.
func (p *refusals) hold(dest string, id int64, since <-chan struct{}) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-since:
		return false
	default:
	}
	if p.held[dest] == nil {
		p.held[dest] = map[int64]struct{}{}
	}
	p.held[dest][id] = struct{}{}
	return true
}

// woken forgets message id of dest, due now or handed back.
func (p *refusals) woken(dest string, id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held[dest], id)
	if len(p.held[dest]) == 0 {
		delete(p.held, dest)
	}
}

// release wakes the turns held for dest, and returns the messages waiting
// in the queue for it, and forgets them: dest just took a delivery.
func (p *refusals) release(dest string) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch := p.up[dest]; ch != nil {
		close(ch)
		delete(p.up, dest)
	}
	ids := make([]int64, 0, len(p.held[dest]))
	for id := range p.held[dest] {
		ids = append(ids, id)
	}
	delete(p.held, dest)
	return ids
}
