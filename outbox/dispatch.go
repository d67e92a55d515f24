package outbox

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/idemkit/idem"
)

// turn is what one turn of a message in a dispatcher came to, for the
// outbox that stores it (Outbox's worker or Memory).
type turn struct {
	// d is the delivery as the Observer sees it (d.Reason: parked).
	d Delivery
	// v is the verdict, and rec the record to keep; wait is the time
	// before the next turn.
	v    verdict
	rec  record
	wait time.Duration
	// putOff: nothing was sent (its destination is at its share of the
	// workers, see share, or came back while the turn held after a
	// refusal, see send); it is not a delivery and is not counted.
	putOff bool
	// stopping: the dispatcher stops; the delivery is not counted and the
	// message is due again at once.
	stopping bool
	// release are the messages held for the destination, which just took
	// a delivery: due again at once (see refusals).
	release []int64
}

// dispatch takes one turn of message msg (id), whose attempt this is the
// n-th of the retry window win, on the workers of its queue, which share
// (sh) divides among the queue's destinations: it parks the message when
// it is overdue, puts it off when its destination is at its share, or
// delivers it and applies the parking rules. It tells the Observer
// nothing: the caller does when it has stored the outcome (see observe).
func (s *settings) dispatch(ctx context.Context, sh *share, id int64, msg *Message, n int, win record) turn {
	dest := destinationOf(msg.URL)
	s.refusals.woken(dest, id)
	msg = s.mutantKey(msg, win)
	t := turn{d: Delivery{ID: id, Name: msg.Name, Key: msg.Key, Attempt: n}, v: retry, rec: win}
	at := s.traceAt()
	if reason := s.overdue(n, win); reason != "" {
		// Dispatchers died delivering it, or it waited too long: park it
		// with its last record.
		t.rec.Outcome, t.d.Reason = string(reason), reason
		return t
	}
	deadline := s.now().Add(s.hold + s.Timeout) // within River's bound (jobTimeout)
	tk, wait, ok := sh.take(ctx, dest)
	if !ok {
		t.putOff, t.wait = true, wait
		return t
	}
	r, started, booked, again, since := s.send(ctx, tk, dest, msg, deadline)
	switch {
	case r.verdict != delivered && r.verdict != refused && ctx.Err() != nil:
		// The dispatcher is stopping (or River's bound passed): deliver it
		// again at once, elsewhere, without counting this delivery.
		t.stopping, t.rec = true, newRecord(r, "", win)
		return t
	case again:
		t.putOff = true // its destination is back: due at once, not counted
		return t
	}
	s.traceDelivery(id, msg.Key, at, started, r.acted)
	win = win.tried(r, started)
	reason, wait := s.decide(r, n, win)
	switch {
	case r.verdict == localRefusal && reason == "":
		if s.refusals.hold(dest, id, since) {
			wait = max(wait, booked)
		} else {
			wait = 0 // dest took a delivery since the refusal: no release will come
		}
	case r.verdict == delivered:
		t.release = s.refusals.release(dest)
	}
	t.d.Status, t.d.Err, t.d.Reason = r.status, r.err, reason
	t.v, t.rec, t.wait = r.verdict, newRecord(r, reason, win), wait
	return t
}

// send delivers msg on ticket tk, and ends the ticket (a panic of the
// client's base transport included). A delivery that its client refused
// (its host's breaker open) holds the worker until the refusal's place in
// the dispatcher's pace (refusals.pace) or deadline, whichever comes
// first, and asks the client again every recheck while a delivery can
// still end by deadline: when the open period ends, the breaker lets one
// of them through, as its probe. It returns the last delivery's result
// and start, the wait left until the refusal's place when deadline came
// first, again: the destination took a delivery (another turn's) while
// this one held, too late for it to try within deadline, and since: the
// channel of refusals.recovered taken before the last delivery began (a
// refused turn holds its message with it, see refusals.hold).
func (s *settings) send(ctx context.Context, tk ticket, dest string, msg *Message, deadline time.Time) (
	r result, started time.Time, booked time.Duration, again bool, since <-chan struct{}) {
	sent := false
	defer func() { tk.end(sent) }()
	var paced time.Time
	up := s.refusals.recovered(dest)
	for {
		tk.begin()
		started = s.now()
		r = deliver(ctx, s, msg)
		if sent = r.verdict != localRefusal; sent {
			if r.verdict == delivered {
				tk.delivered()
			}
			return r, started, 0, false, up
		}
		if paced.IsZero() {
			tk.refused()
			paced = s.refusals.pace()
		}
		now := s.now()
		until := paced
		if deadline.Before(until) {
			until = deadline
		}
		if !now.Before(until) {
			return r, started, max(paced.Sub(now), 0), false, up
		}
		try := !now.Add(s.Timeout).After(deadline)
		wait := until.Sub(now)
		if try {
			wait = min(wait, recheck)
		}
		switch pause(ctx, up, wait) {
		case pauseStopped:
			return r, started, 0, false, up
		case pauseRecovered:
			if !try {
				return r, started, 0, true, up
			}
			up = s.refusals.recovered(dest)
		}
	}
}

// The ways a pause ends.
const (
	pauseElapsed = iota
	pauseRecovered
	pauseStopped
)

// pause waits for d, for up to be closed, or for ctx to end, and says
// which came first.
func pause(ctx context.Context, up <-chan struct{}, d time.Duration) int {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return pauseStopped
	case <-up:
		return pauseRecovered
	case <-timer.C:
		return pauseElapsed
	}
}

// request builds the HTTP request of one delivery of m. The key goes in
// the context (idem.WithKey): the idem client sends it in the header its
// Config.KeyHeader names, on every attempt.
func request(ctx context.Context, m *Message) (*http.Request, error) {
	req, err := http.NewRequestWithContext(idem.WithKey(ctx, m.Key), m.Method, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		return nil, err
	}
	for k, v := range m.Header {
		req.Header[k] = append([]string(nil), v...)
	}
	return req, nil
}

// deliver sends m once through s.rt (an idem transport, which retries
// within the attempt) within s.Timeout, and classifies the outcome. The
// call fails fast (idem.WithFailFast): a delivery that its host's breaker
// or the retry budget refuses ends at once, instead of holding a worker
// while the host is down; the outbox backs it off itself.
func deliver(ctx context.Context, s *settings, m *Message) result {
	ctx, cancel := context.WithTimeout(idem.WithFailFast(ctx), s.Timeout)
	defer cancel()
	req, err := request(ctx, m)
	if err != nil {
		return result{verdict: refused, err: err}
	}
	resp, err := s.rt.RoundTrip(req)
	return classify(resp, err, s.now())
}
