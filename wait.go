package idem

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Waiting for a local refusal to pass: a call that its host's breaker does
// not let through (breaker_host.go), or a retry that the budget has no
// token for (budget.go), waits in a line of its own kind, within what its
// waitPolicy allows, and is turned away with a *refusal that says why.

// waitPolicy is how long a call may wait for a local refusal to pass.
type waitPolicy struct {
	failFast bool
	until    time.Time // the call's deadline or the end of its wait bound, the earlier; zero for none
	bound    string    // what until is: "the context's deadline" or "MaxWait"
	deadline time.Time // the context's deadline, zero for none
	newTimer func(time.Duration) *time.Timer
}

// ended returns context.DeadlineExceeded when the context's deadline has
// passed at now, nil otherwise: the cause of a refusal at the end of a
// wait, which must match the context's error whichever of the wait's
// timer and the context's own saw the deadline first.
func (p waitPolicy) ended(now time.Time) error {
	if !p.deadline.IsZero() && !now.Before(p.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// refusal is why a local refusal did not pass: the host's breaker did not
// let an attempt through, or the budget gave a retry no token.
type refusal struct {
	detail string
	cause  error // the context's error when it ended the wait, else nil
}

func (r *refusal) Error() string { return r.detail }

// waiter is a call waiting in a [waitQueue]. Whoever holds the queue's
// lock decides for it: it lets it through (done, with value) or turns it
// away (done, with refused set), takes it out of the line, and signals it.
// value is what the line's owner gave it (a host's ticket) or holds for it
// (the budget's floor reservation).
type waiter[T any] struct {
	ready    chan struct{} // a signal to look again
	deadline time.Time     // its context's deadline, zero for none
	done     bool          // let through or turned away
	refused  *refusal      // why it was turned away, nil when let through
	value    T
}

func newWaiter[T any](deadline time.Time) *waiter[T] {
	return &waiter[T]{ready: make(chan struct{}, 1), deadline: deadline}
}

// signal tells w to look again; a signal already pending is enough.
func (w *waiter[T]) signal() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// park releases mu, the lock of w's line, until w is told to look again,
// timerC fires (nil: never) or ctx ends, and takes mu again.
func (w *waiter[T]) park(ctx context.Context, mu *sync.Mutex, timerC <-chan time.Time) {
	mu.Unlock()
	select {
	case <-w.ready:
	case <-timerC:
	case <-ctx.Done():
	}
	mu.Lock()
}

// waitQueue is a line of waiting calls, oldest first. It is not safe for
// concurrent use: its owner's lock guards it.
type waitQueue[T any] struct {
	l list.List // of *waiter[T]
}

func (q *waitQueue[T]) len() int { return q.l.Len() }

// push adds w at the back of the line.
func (q *waitQueue[T]) push(w *waiter[T]) *list.Element { return q.l.PushBack(w) }

// front returns the oldest waiter, nil when none waits.
func (q *waitQueue[T]) front() *list.Element { return q.l.Front() }

// isFront reports whether e is the oldest waiter.
func (q *waitQueue[T]) isFront(e *list.Element) bool { return q.l.Front() == e }

// take removes e from the line and returns its waiter.
func (q *waitQueue[T]) take(e *list.Element) *waiter[T] { return q.l.Remove(e).(*waiter[T]) }

// at returns the waiter at e.
func (q *waitQueue[T]) at(e *list.Element) *waiter[T] { return e.Value.(*waiter[T]) }

// covering returns the oldest waiter with at least need left at now (or
// no deadline); when none has, the one with the most time left, the oldest
// of those that tie. Nil when none waits.
func (q *waitQueue[T]) covering(now time.Time, need time.Duration) *list.Element {
	var best *list.Element
	for e := q.l.Front(); e != nil; e = e.Next() {
		d := q.at(e).deadline
		if d.IsZero() || d.Sub(now) >= need {
			return e
		}
		if best == nil || d.After(q.at(best).deadline) {
			best = e
		}
	}
	return best
}

// signalAll tells every waiter to look again.
func (q *waitQueue[T]) signalAll() {
	for e := q.l.Front(); e != nil; e = e.Next() {
		q.at(e).signal()
	}
}

// signalFront tells the oldest waiter to look again.
func (q *waitQueue[T]) signalFront() {
	if e := q.l.Front(); e != nil {
		q.at(e).signal()
	}
}
