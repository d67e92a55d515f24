package testserver

import (
	"context"
	"sync"
	"time"
)

// Event is the ground truth about one request: what arrived, what the
// server did to it and what went out. It is logged when the server is done
// with the request, so events are ordered by completion; Index gives the
// order of arrival.
type Event struct {
	// Index is the global request index: 1 for the first request.
	Index int `json:"index"`
	// Time is when the request arrived (its headers were read).
	Time time.Time `json:"time"`
	// End is when the server was done with the request.
	End time.Time `json:"end"`
	// Conn identifies the connection (1 for the first accepted); Reused
	// is true when an earlier request came on the same connection.
	Conn   uint64 `json:"conn"`
	Reused bool   `json:"reused"`
	// Method and Path are the request's.
	Method string `json:"method"`
	Path   string `json:"path"`
	// Key is the Idempotency-Key, parsed (the key itself, without the
	// quotes of its sf-string form); as received when it is malformed; ""
	// when absent. Op is the operation id (the key, or the
	// [Config.OperationHeader] value, or "").
	Key string `json:"key,omitempty"`
	Op  string `json:"op,omitempty"`
	// Attempt is the attempt number of Op: 1 for the first request with
	// this id, or for the first after an hour without one (the server
	// forgets idle operation ids, so that a long run does not grow);
	// always 1 without an id.
	Attempt int `json:"attempt"`
	// Rule names the rule that decided the fault ("" when none matched,
	// "header" for [Config.FaultHeader]).
	Rule string `json:"rule,omitempty"`
	// Fault is the fault applied; [Fault.Kind] is [FaultNone] for a pass. In
	// JSON it is a string in the [ParseFault] syntax ("none" for a pass).
	Fault Fault `json:"fault"`
	// HandlerRan is true when the handler was called. In a proxy it is
	// true when the request was sent upstream, or may have been: it is
	// false when no connection to the upstream could be opened (a dial
	// error, answered 502).
	HandlerRan bool `json:"handler_ran"`
	// HandlerStatus is the status the handler produced (0 when it did not
	// run or wrote nothing).
	HandlerStatus int `json:"handler_status,omitempty"`
	// Status is the status line that went out, 0 when none did (drops,
	// resets, blackholes, a client that left first).
	Status int `json:"status,omitempty"`
	// BodyBytes is how many response body bytes the server wrote: to the
	// response writer when the response went through net/http, to the
	// connection when the fault wrote it raw. Bytes handed to a connection
	// the client had already closed count too.
	BodyBytes int64 `json:"body_bytes"`
	// Upstream is the upstream URL a proxy used ("" for [New]).
	Upstream string `json:"upstream,omitempty"`
	// Err says why the request ended abnormally on the server side (the
	// client left during a delay, an upstream error...); "" otherwise.
	Err string `json:"err,omitempty"`
}

// eventLog keeps the events of a [Server]: the latest max of them in a ring
// (all of them when max is 0), so that logging costs O(1) however many are
// kept.
type eventLog struct {
	mu      sync.Mutex
	max     int           // 0: keep all
	events  []Event       // the kept events; once len(events) == max, a ring
	next    int           // the ring's oldest event, overwritten by the next add
	total   int           // events ever logged
	arrived int           // requests ever numbered
	changed chan struct{} // closed at the next change; nil when nobody waits
}

func newEventLog(max int) *eventLog {
	return &eventLog{max: max}
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max == 0 || len(l.events) < l.max {
		l.events = append(l.events, e)
	} else {
		l.events[l.next] = e
		l.next = (l.next + 1) % l.max
	}
	l.total++
	l.broadcast()
}

// arrive counts a request that was just numbered.
func (l *eventLog) arrive() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.arrived++
	l.broadcast()
}

// broadcast wakes the waiters, if any; called with l.mu held.
func (l *eventLog) broadcast() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// kept returns a copy of the kept events in logging order; called with
// l.mu held.
func (l *eventLog) kept() []Event {
	out := make([]Event, 0, len(l.events))
	out = append(out, l.events[l.next:]...)
	return append(out, l.events[:l.next]...)
}

// snapshot returns a copy of the kept events.
func (l *eventLog) snapshot() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kept()
}

// wait blocks until n events were logged in all, or ctx is done.
func (l *eventLog) wait(ctx context.Context, n int) ([]Event, error) {
	return l.waitFor(ctx, func() bool { return l.total >= n })
}

// waitArrived blocks until n requests were numbered, or ctx is done.
func (l *eventLog) waitArrived(ctx context.Context, n int) error {
	_, err := l.waitFor(ctx, func() bool { return l.arrived >= n })
	return err
}

// waitFor blocks until cond (called with l.mu held) is true, or ctx is
// done, and returns the events kept. It copies them only then, not at
// every wake-up.
func (l *eventLog) waitFor(ctx context.Context, cond func() bool) ([]Event, error) {
	for {
		l.mu.Lock()
		if cond() {
			events := l.kept()
			l.mu.Unlock()
			return events, nil
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return l.snapshot(), ctx.Err()
		}
	}
}
