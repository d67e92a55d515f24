package idem

import (
	"container/list"
	"time"
)

// waiter is a call waiting in a [waitQueue] for a local refusal to pass.
// Whoever holds the queue's lock decides for it: it lets it through
// (done, with what it was given) or turns it away (done, with refused
// set), takes it out of the queue, and signals it.
type waiter struct {
	ready    chan struct{} // a signal to look again
	deadline time.Time     // its context's deadline, zero for none
	done     bool          // let through or turned away
	refused  *refusal      // why it was turned away, nil when let through
	ticket   ticket        // what a host's breaker gave it
}

func newWaiter(deadline time.Time) *waiter {
	return &waiter{ready: make(chan struct{}, 1), deadline: deadline}
}

// signal tells w to look again; a signal already pending is enough.
func (w *waiter) signal() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// waitQueue is a line of waiting calls, oldest first. It is not safe for
// concurrent use: its owner's lock guards it.
type waitQueue struct {
	l list.List // of *waiter
}

func (q *waitQueue) len() int { return q.l.Len() }

// push adds w at the back of the line.
func (q *waitQueue) push(w *waiter) *list.Element { return q.l.PushBack(w) }

// front returns the oldest waiter, nil when none waits.
func (q *waitQueue) front() *list.Element { return q.l.Front() }

// isFront reports whether e is the oldest waiter.
func (q *waitQueue) isFront(e *list.Element) bool { return q.l.Front() == e }

// take removes e from the line and returns its waiter.
func (q *waitQueue) take(e *list.Element) *waiter { return q.l.Remove(e).(*waiter) }

// covering returns the oldest waiter with at least need left at now (or
// no deadline); when none has, the one with the most time left, the oldest
// of those that tie. Nil when none waits.
func (q *waitQueue) covering(now time.Time, need time.Duration) *list.Element {
	var best *list.Element
	for e := q.l.Front(); e != nil; e = e.Next() {
		d := e.Value.(*waiter).deadline
		if d.IsZero() || d.Sub(now) >= need {
			return e
		}
		if best == nil || d.After(best.Value.(*waiter).deadline) {
			best = e
		}
	}
	return best
}

// signalAll tells every waiter to look again.
func (q *waitQueue) signalAll() {
	for e := q.l.Front(); e != nil; e = e.Next() {
		e.Value.(*waiter).signal()
	}
}

// signalFront tells the oldest waiter to look again.
func (q *waitQueue) signalFront() {
	if e := q.l.Front(); e != nil {
		e.Value.(*waiter).signal()
	}
}
