package idem

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// maxProblemBytes bounds how much of a problem document is read to learn its
// name.
const maxProblemBytes = 16 << 10

// result is what one attempt produced.
type result struct {
	req        *http.Request  // the attempt's request; nil when none was built
	resp       *http.Response // set when a complete response arrived (Responded)
	status     int            // the status received, also when the body was then cut short
	problem    string         // the problem name of a problem+json response
	retryAfter time.Duration  // Retry-After, unclamped
	certainty  Certainty
	err        error // the transport error or the cut-short body error
	wire       int   // connections the base transport used
	open       bool  // the host's breaker refused the attempt
	elapsed    time.Duration
}

// attempt sends one attempt of the call through its host's breaker, and
// reads ahead what the decision and a possible retry need of the response.
func (c *call) attempt(ctx context.Context) result {
	actx, done := ctx, context.CancelFunc(func() {})
	if c.t.cfg.AttemptTimeout > 0 {
		actx, done = context.WithTimeout(ctx, c.t.cfg.AttemptTimeout)
	}
	var res result
	err := c.t.breakers.through(c.req.URL, func() error {
		var outcome error
		res, outcome = c.exchange(ctx, actx, done)
		return outcome
	})
	if err != nil {
		done()
		return result{certainty: NotSent, err: err, open: true}
	}
	return res
}

// exchange builds and sends the request of one attempt, under actx. It
// returns what the attempt produced, and what its host's breaker is told.
func (c *call) exchange(ctx, actx context.Context, done context.CancelFunc) (result, error) {
	trace := newWireTrace(c.t.tracedBase)
	actx = httptrace.WithClientTrace(actx, &trace.hooks)
	timed := c.t.cfg.Observer.seesAttempts()
	var start time.Time
	if timed {
		start = c.t.now()
	}
	req, err := c.request(actx)
	if err != nil {
		done()
		return result{certainty: NotSent, err: err}, errAttemptExcluded
	}
	res := c.send(req, trace, done)
	res.req = req
	if timed {
		res.elapsed = c.t.now().Sub(start)
	}
	return res, res.outcome(ctx.Err() != nil)
}

// send runs the base transport for one attempt and settles its response.
func (c *call) send(req *http.Request, trace *wireTrace, done context.CancelFunc) result {
	resp, err := c.t.cfg.Base.RoundTrip(req)
	conns := int(trace.conns.Load())
	res := result{wire: max(1, conns), certainty: Responded}
	if err != nil {
		done()
		res.err, res.certainty = err, trace.unanswered(req, err, conns)
		return res
	}
	c.settle(resp, done, &res)
	return res
}

// request builds the request of the next attempt: a clone of the caller's
// request with the key header and a fresh body.
func (c *call) request(ctx context.Context) (*http.Request, error) {
	r := c.req.Clone(ctx)
	if c.field != "" {
		r.Header[KeyHeader] = []string{c.field} // Set, without canonicalising a canonical name
	}
	body, err := c.body.next()
	if err != nil {
		return nil, fmt.Errorf("%w: GetBody: %v", ErrNotRewindable, err)
	}
	r.Body = body
	return r, nil
}

// settle records the response in res and reads ahead of its body what the
// call needs: a problem document's name, and, for a response that may be
// returned from a retry-safe call, the body itself (see MaxBufferedBody).
// A body cut short turns the attempt ambiguous.
func (c *call) settle(resp *http.Response, done context.CancelFunc, res *result) {
	res.status = resp.StatusCode
	if v := firstValue(resp.Header, wire.HeaderRetryAfter); v != "" { // the clock only when needed
		if ra, ok := wire.ParseRetryAfter(v, c.t.now()); ok {
			res.retryAfter = ra
		}
	}
	ct := firstValue(resp.Header, "Content-Type")
	problem := resp.StatusCode >= 400 && wire.IsProblem(ct)
	limit := c.readAheadLimit(resp.StatusCode, problem)
	if limit <= 0 {
		if c.t.cfg.AttemptTimeout > 0 {
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, done: done}
		}
		res.resp = resp
		return
	}
	buf, err := readAhead(resp, limit, done)
	if err != nil {
		res.certainty = Ambiguous
		res.err = fmt.Errorf("response body cut short after %d bytes (status %d): %w", len(buf), resp.StatusCode, err)
		return
	}
	res.resp = resp
	if problem {
		if p, ok := wire.ReadProblem(ct, bytes.NewReader(buf), maxProblemBytes); ok {
			res.problem = p.Name()
		}
	}
}

// readAheadLimit says how much of a response's body to read before
// deciding: a problem document (problem: its Content-Type says so) where
// the status code can carry a contract problem, the whole body (up to
// MaxBufferedBody) where the response may be returned and a cut could be
// retried, else nothing.
func (c *call) readAheadLimit(code int, problem bool) int64 {
	if retryableStatus(code) || code == http.StatusBadRequest ||
		code == http.StatusConflict || code == http.StatusUnprocessableEntity {
		if problem {
			return maxProblemBytes
		}
		return 0
	}
	if c.safe {
		return c.t.cfg.MaxBufferedBody
	}
	return 0
}

// firstValue returns the first value of h's field key, which must be in
// canonical form (as net/http stores received fields): Header.Get without
// canonicalising the name on every call.
func firstValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// retryableStatus reports whether a response with this status may be
// retried (docs/CONTRACT.md §8): the request was refused or failed in a
// way that a later attempt can fix.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}
