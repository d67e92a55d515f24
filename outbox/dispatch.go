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
	// putOff: nothing was sent, its destination is at its share of the
	// workers (see share); it is not a delivery and is not counted.
	putOff bool
	// stopping: the dispatcher stops; the delivery is not counted and the
	// message is due again at once.
	stopping bool
	// release are the messages held for the destination, which just took
	// a delivery: due again at once (see refusals).
	release []int64
}

// dispatch takes one turn of message msg (id), whose attempt this is the
// n-th of the retry window win: it parks it when it is overdue, puts it
// off when its destination is at its share (or no worker is free within
// slotWait), or delivers it, on one of the Workers, and applies the
// parking rules. It tells the Observer nothing: the caller does when
// it has stored the outcome (see observe).
func (s *settings) dispatch(ctx context.Context, id int64, msg *Message, n int, win record) turn {
	dest := destinationOf(msg.URL)
	s.refusals.woken(dest, id)
	t := turn{d: Delivery{ID: id, Name: msg.Name, Key: msg.Key, Attempt: n}, v: retry, rec: win}
	if reason := s.overdue(n, win); reason != "" {
		// Dispatchers died delivering it, or it waited too long: park it
		// with its last record.
		t.rec.Outcome, t.d.Reason = string(reason), reason
		return t
	}
	tk, wait, ok := s.share.take(ctx, dest)
	if ok && !s.worker(ctx) {
		tk.cancel()
		ok, wait = false, 0
	}
	if !ok {
		t.putOff, t.wait = true, wait
		return t
	}
	r, started := s.send(ctx, tk, msg)
	if r.verdict == retry && ctx.Err() != nil {
		// The dispatcher is stopping (or River's bound passed): deliver it
		// again at once, elsewhere, without counting this delivery.
		t.stopping, t.rec = true, newRecord(r, "", win)
		return t
	}
	win = win.tried(r, started)
	reason, wait := s.decide(r, n, win)
	switch {
	case r.verdict == localRefusal && reason == "":
		wait = s.refusals.schedule(dest, id, wait)
	case r.verdict == delivered:
		t.release = s.refusals.release(dest)
	}
	t.d.Status, t.d.Err, t.d.Reason = r.status, r.err, reason
	t.v, t.rec, t.wait = r.verdict, newRecord(r, reason, win), wait
	return t
}

// send delivers msg on ticket tk and one of the Workers, which it gives
// back (a panic of the client's base transport included).
func (s *settings) send(ctx context.Context, tk ticket, msg *Message) (r result, started time.Time) {
	sent := false
	defer func() {
		tk.end(sent)
		<-s.workers
	}()
	tk.begin()
	started = s.now()
	r = deliver(ctx, s, msg)
	sent = r.verdict != localRefusal
	return r, started
}

// worker waits, within ctx and slotWait, for one of the Workers that
// deliver: the Postgres outbox fetches more messages than it delivers at
// once (see settings.window), so that it passes those put off quickly.
func (s *settings) worker(ctx context.Context) bool {
	select {
	case s.workers <- struct{}{}:
		return true
	default:
	}
	timer := time.NewTimer(s.slotWait)
	defer timer.Stop()
	select {
	case s.workers <- struct{}{}:
		return true
	case <-ctx.Done():
	case <-timer.C:
	}
	return false
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
