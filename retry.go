package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// call is one RoundTrip: the attempts of one logical operation.
type call struct {
	t          *Transport
	req        *http.Request // the caller's, never modified
	key, field string        // the bare key and the header value; "" for none
	safe       bool          // keyed or idempotent: an ambiguous attempt may be retried
	body       requestBody

	attempts  int           // requests put on the wire
	retries   int           // retries made
	prevWait  time.Duration // the previous backoff wait
	mayActed  bool          // some attempt may have taken effect
	lastRetry time.Duration // the latest Retry-After seen
}

// verdict is what the call does after an attempt.
type verdict int

const (
	finish verdict = iota // return the response
	retry                 // try again after a wait
	fail                  // return an error
)

// newCall returns the call of req. It returns a value, not a pointer, so
// that the call can live on RoundTrip's stack.
func (t *Transport) newCall(req *http.Request) (call, error) {
	key, field, err := t.requestKey(req)
	if err != nil {
		return call{}, &Error{Method: req.Method, URL: redact(req), Certainty: NotSent, Reason: ErrKeyInvalid, Err: err}
	}
	return call{
		t: t, req: req, key: key, field: field,
		safe: key != "" || isIdempotent(req.Method),
		body: newRequestBody(req),
	}, nil
}

// run makes attempts until one gives a response to return, an error to
// return, or no retry is allowed.
func (c *call) run() (*http.Response, error) {
	defer c.body.release()
	ctx := c.req.Context()
	if c.t.budget != nil {
		c.t.budget.firstAttempt()
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, c.giveUp(result{certainty: NotSent}, nil, err, "the context ended before the attempt")
		}
		res := c.attempt(ctx)
		actedBefore := c.mayActed // an attempt before this one may have taken effect
		c.record(res)
		v, detail, reason := c.judge(res)
		if ctx.Err() != nil && v != finish {
			discard(res.resp)
			return nil, c.giveUp(res, nil, ctx.Err(), "the context ended")
		}
		switch {
		case v == finish:
			return res.resp, nil
		case v == fail:
			discard(res.resp)
			return nil, c.giveUp(res, reason, res.err, detail)
		case c.attempts >= c.t.cfg.MaxAttempts:
			return c.exhausted(res, actedBefore)
		}
		if err := c.wait(ctx, res); err != nil {
			return nil, err
		}
	}
}

// record counts an attempt and reports it to the Observer.
func (c *call) record(res result) {
	c.attempts += res.wire
	if res.retryAfter > 0 {
		c.lastRetry = res.retryAfter
	}
	if res.certainty == Ambiguous || res.status >= 500 ||
		res.problem == wire.ProblemKeyInFlight || res.problem == wire.ProblemResultUnavailable {
		c.mayActed = true
	}
	c.t.cfg.Observer.attempt(c.describe(res))
}

// judge decides what follows an attempt, by docs/CONTRACT.md §8: the
// verdict and, for a failure, a sentence of detail and the reason (the
// sentinel that names why the call ends).
func (c *call) judge(res result) (v verdict, detail string, reason error) {
	switch {
	case res.open:
		return fail, "", ErrCircuitOpen
	case errors.Is(res.err, ErrNotRewindable):
		return fail, "", ErrNotRewindable
	case res.certainty == NotSent:
		return c.retryIfBody()
	case res.certainty == Ambiguous && !c.safe:
		return fail, "the request has no Idempotency-Key and its method is not idempotent, so it was not retried", ErrOutcomeUnknown
	case res.certainty == Ambiguous:
		return c.retryIfBody()
	}
	switch res.problem {
	case wire.ProblemKeyReused:
		return fail, "", ErrKeyReused
	case wire.ProblemKeyMissing:
		return fail, "", ErrKeyMissing
	case wire.ProblemKeyInvalid:
		return fail, "the server rejected the key", ErrKeyInvalid
	case wire.ProblemResultUnavailable:
		return fail, "", ErrResultUnavailable
	case wire.ProblemKeyInFlight:
		if c.key != "" {
			return c.retryIfBody()
		}
	}
	if retryableStatus(res.status) && c.safe && c.body.resendable() {
		return retry, "", nil
	}
	return finish, "", nil
}

func (c *call) retryIfBody() (verdict, string, error) {
	if c.body.resendable() {
		return retry, "", nil
	}
	return fail, "the body was written once and has no GetBody to write it again", ErrNotRewindable
}

// exhausted ends a call whose last allowed attempt asked for a retry. The
// last response is returned as it is, unless an earlier attempt may have
// acted (actedBefore: a 5xx, a lost response), when the last response says
// nothing of the operation's outcome, or it is a 409 key-in-flight, which
// says that an attempt of the key is still running: then the error says
// that it may have taken effect.
func (c *call) exhausted(res result, actedBefore bool) (*http.Response, error) {
	if res.resp != nil && !actedBefore && res.problem != wire.ProblemKeyInFlight {
		return res.resp, nil
	}
	discard(res.resp)
	reason := ErrAttemptsExhausted
	if res.problem == wire.ProblemKeyInFlight {
		reason = ErrKeyInFlight
	}
	return nil, c.giveUp(res, reason, res.err, "")
}

// wait sleeps before the next attempt, unless the wait cannot end before
// the context's deadline or the budget has no token for the retry; then, or
// when the context ends during the wait, it returns the call's error.
func (c *call) wait(ctx context.Context, res result) error {
	discard(res.resp)
	d, why := c.delay(res)
	if deadline, ok := ctx.Deadline(); ok {
		if left := deadline.Sub(c.t.now()); d >= left {
			return c.giveUp(res, ErrDeadline, res.err,
				fmt.Sprintf("the next wait of %s (%s) would end past the context deadline, %s away",
					d.Round(time.Millisecond), why, left.Round(time.Millisecond)))
		}
	}
	if c.t.budget != nil && !c.t.budget.allowRetry() {
		return c.giveUp(res, ErrBudgetExhausted, res.err, "")
	}
	c.t.cfg.Observer.retry(c.describe(res), d)
	c.t.log.LogAttrs(ctx, slog.LevelDebug, "idem: retrying",
		append(logAttrs(c, res), slog.Duration("wait", d))...)
	if err := c.t.sleep(ctx, d); err != nil {
		return c.giveUp(res, nil, err, "the context ended during the wait before a retry")
	}
	c.retries++
	return nil
}

// delay returns the wait before the next attempt, and where it comes from.
func (c *call) delay(res result) (time.Duration, string) {
	if res.retryAfter > 0 {
		d := min(res.retryAfter, c.t.cfg.MaxRetryAfter)
		if d < res.retryAfter {
			return d, fmt.Sprintf("Retry-After %s clamped to MaxRetryAfter", res.retryAfter)
		}
		return d, fmt.Sprintf("Retry-After %s", res.retryAfter)
	}
	d := c.t.cfg.Backoff.Delay(c.retries, c.prevWait, c.t.rand())
	c.prevWait = d
	return d, "backoff"
}

// giveUp builds the call's error, and reports it.
func (c *call) giveUp(res result, reason, cause error, detail string) error {
	err := &Error{
		Method: c.req.Method, URL: redact(c.req), Key: c.key,
		Attempts: c.attempts, Certainty: res.certainty, Status: res.status,
		RetryAfter: c.lastRetry, Reason: reason, Err: cause, Detail: detail,
		MayHaveTakenEffect: c.mayActed,
	}
	c.t.cfg.Observer.giveUp(c.describe(res), err)
	c.t.log.LogAttrs(c.req.Context(), slog.LevelInfo, "idem: giving up",
		append(logAttrs(c, res), slog.Any("error", err))...)
	return err
}

// describe reports an attempt to the Observer.
func (c *call) describe(res result) Attempt {
	req := res.req
	if req == nil {
		req = c.req
	}
	return Attempt{
		Request: req, Key: c.key, Number: c.attempts, Wire: res.wire,
		Certainty: res.certainty, Status: res.status, Problem: res.problem,
		RetryAfter: res.retryAfter, Err: res.err, Elapsed: res.elapsed,
	}
}

// redact returns the request URL without its query string and user info,
// which may hold secrets.
func redact(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	u := *req.URL
	u.User, u.RawQuery, u.ForceQuery = nil, "", false
	return u.String()
}
