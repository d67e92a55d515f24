package outbox

import (
	"sync"
	"time"
)

// refusalRate is how many messages whose delivery the client refused
// (circuit open, no budget) a dispatcher makes due again per second, at
// most: each such wake costs River up to three row updates (the refused
// delivery's completion, its scheduler making the message available
// after a wait over 5 s, and the fetch), so a dead destination's backlog
// costs the database at most three times this many a second, however
// long it is.
const refusalRate = 15

// refusals paces the messages of one dispatcher whose delivery its idem
// client refused, and remembers them by destination. A refused message is
// due again after its backoff, in the first second from then that has
// fewer than refusalRate such messages due, at a random point of it; when
// a delivery to its destination succeeds again, release hands its held
// messages back so that they are made due at once. It is safe for
// concurrent use.
type refusals struct {
	mu     sync.Mutex
	now    func() time.Time
	random func() float64 // in [0, 1)
	due    map[int64]int  // unix second -> refused messages due in it
	floor  int64          // seconds before it are forgotten
	held   map[string]map[int64]struct{}
}

func newRefusals(now func() time.Time, random func() float64) *refusals {
	return &refusals{now: now, random: random, due: map[int64]int{}, held: map[string]map[int64]struct{}{}}
}

// schedule returns how long message id, just refused for destination
// dest, waits: at least wait, in a second with room.
func (p *refusals) schedule(dest string, id int64, wait time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.forget(now.Unix())
	at := now.Add(wait)
	sec := at.Unix()
	for p.due[sec] >= refusalRate {
		sec++
	}
	p.due[sec]++
	if sec != at.Unix() {
		at = time.Unix(sec, 0).Add(time.Duration(p.random() * float64(time.Second)))
	}
	if p.held[dest] == nil {
		p.held[dest] = map[int64]struct{}{}
	}
	p.held[dest][id] = struct{}{}
	return max(at.Sub(now), 0)
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

// woken forgets message id of dest, due now or handed back.
func (p *refusals) woken(dest string, id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held[dest], id)
	if len(p.held[dest]) == 0 {
		delete(p.held, dest)
	}
}

// release returns the messages held for dest, and forgets them.
func (p *refusals) release(dest string) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]int64, 0, len(p.held[dest]))
	for id := range p.held[dest] {
		ids = append(ids, id)
	}
	delete(p.held, dest)
	return ids
}
