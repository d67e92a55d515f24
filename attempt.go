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
	req        *http.Request   // the attempt's request; nil when none was sent
	resp       *http.Response  // set when a complete response arrived (Responded)
	status     int             // the status received, also when the body was then cut short
	problem    string          // the problem name of a problem+json response
	body       []byte          // the part of the body read ahead, nil when none
	retryAfter time.Duration   // retry-after-ms, else Retry-After, unclamped
	rateLimit  *wire.RateLimit // what the RateLimit fields announced, nil when none
	gate       error           // with open: the sentinel of a refusal other than the breaker's (ErrRateLimited, ErrOverloaded)
	certainty  Certainty
	rule       *rule  // the outcome's row of the table (outcomes.go)
	err        error  // the transport error or the cut-short body error; the context's for a refusal
	wire       int    // connections the base transport used
	open       bool   // the host's breaker refused the attempt
	refusal    string // why, when open
	hedge      bool   // the attempt was a hedge (hedge.go)
	number     int    // the attempt's Number (see Attempt)
	resend     Resend // why the attempt re-sends the request (see Attempt)
	elapsed    time.Duration
}

// sender sends the attempts of one call. It is a copy of what they need, so
// that a hedge can run on a goroutine of its own without the call. Every
// result of an attempt, sent or not, is made by its sender, which gives it
// its Number, Hedge and Resend.
type sender struct {
	t          *Transport
	bounded    bool       // the attempt's context has a timeout, ended when the body is closed
	safe       bool       // the response may be read ahead in full
	classified bool       // a Classifier reads error bodies
	latencies  *latencies // the host's latencies to record, nil for none

	// What the [Observer]'s OnSend and done are told of the attempt.
	key    string
	number int  // the attempt's Number before it is sent
	hedge  bool // the attempt is a hedge
	resend Resend
}

// sender returns the sender of the call's next attempt, its number-th
// request on the wire; a hedge re-sends nothing.
func (c *call) sender(number int, hedge bool) sender {
	s := sender{t: c.t, safe: c.safe, classified: c.classified, latencies: c.host.latenciesOrNil(),
		key: c.key, number: number, hedge: hedge}
	if !hedge {
		s.resend = c.resend
	}
	return s
}

// attempt sends one attempt of the call under ctx, which its host's
// breaker let through (tk), and reads ahead what the decision and a
// possible retry need of the response.
func (c *call) attempt(ctx context.Context, tk ticket) result {
	s := c.sender(c.attempts+1, false)
	actx, done := c.t.attemptContext(ctx, tk)
	s.bounded = c.t.cfg.AttemptTimeout > 0 || tk.limit > 0
	trace := newWireTrace(c.t.tracedBase)
	req, err := c.request(httptrace.WithClientTrace(actx, &trace.hooks))
	if err != nil {
		done()
		tk.end(errAttemptExcluded, 0)
		return s.unsent(err, false)
	}
	return s.send(ctx, req, trace, done, tk)
}

// attemptContext returns the context of one attempt under ctx, which its
// host's breaker let through (tk), and the function that ends it. It is
// bounded by [Config.AttemptTimeout], and a probe by its own limit too (see
// [BreakerConfig]): an attempt ended by either fails, and counts.
func (t *Transport) attemptContext(ctx context.Context, tk ticket) (context.Context, context.CancelFunc) {
	switch {
	case t.cfg.AttemptTimeout > 0 && tk.limit > 0:
		return context.WithTimeout(ctx, min(t.cfg.AttemptTimeout, tk.limit))
	case t.cfg.AttemptTimeout > 0:
		return context.WithTimeout(ctx, t.cfg.AttemptTimeout)
	case tk.limit > 0:
		return context.WithTimeout(ctx, tk.limit)
	}
	return ctx, func() {}
}

// send sends req, built under ctx for one attempt that its host's breaker
// let through (tk), and reports the outcome to the breaker; done ends the
// attempt's context. A panic (or a Goexit) of the base transport or of an
// [Observer] hook counts as a failure of the host, as gobreaker's Execute
// counts it, and goes on.
func (s sender) send(ctx context.Context, req *http.Request, trace *wireTrace, done context.CancelFunc, tk ticket) result {
	var res result
	report := errAttemptFailed
	defer func() { tk.end(report, res.retryAfter) }()
	res, report = s.exchange(ctx, req, trace, done)
	return res
}

// exchange runs the base transport for one attempt and settles its
// response. It returns what the attempt produced, and what its host's
// breaker is told.
func (s sender) exchange(ctx context.Context, req *http.Request, trace *wireTrace, done context.CancelFunc) (result, error) {
	timed := s.latencies != nil || s.t.cfg.ConcurrencyLimit || s.t.cfg.Observer.seesAttempts() // the clock only when needed
	var sent func(Attempt)
	if s.t.cfg.Observer.OnSend != nil {
		req, sent = s.announce(req)
	}
	var start time.Time
	if timed {
		start = s.t.now()
	}
	resp, err := s.t.cfg.Base.RoundTrip(req)
	conns := int(trace.conns.Load())
	res := result{req: req, wire: max(1, conns), certainty: Responded, hedge: s.hedge, resend: s.resend}
	res.number = s.number + res.wire - 1
	if err != nil {
		done()
		res.err, res.certainty = err, trace.unanswered(req, err, conns)
	} else {
		s.settle(resp, done, &res)
	}
	res.rule = classify(res.certainty, res.status, res.problem)
	if timed {
		res.elapsed = s.t.now().Sub(start)
		s.recordLatency(ctx, res)
	}
	if sent != nil {
		sent(res.observed(s.key, req))
	}
	return res, res.breakerReport(ctx.Err() != nil)
}

// announce tells the [Observer]'s OnSend that req is about to be sent, and
// returns req under the context OnSend returned, and OnSend's done.
func (s sender) announce(req *http.Request) (*http.Request, func(Attempt)) {
	a := Attempt{Request: req, Key: s.key, Number: s.number, Hedge: s.hedge, Resend: s.resend}
	ctx, done := s.t.cfg.Observer.OnSend(req.Context(), a)
	if ctx != nil && ctx != req.Context() {
		req = req.WithContext(ctx)
	}
	return req, done
}

// unsent is the result of an attempt that was not sent because its request
// could not be built (err), or because the call's context ended before it.
// Its Number is the count of the requests sent before it.
func (s sender) unsent(err error, open bool) result {
	return result{certainty: NotSent, err: err, open: open, rule: notSentRule,
		number: s.number - 1, hedge: s.hedge, resend: s.resend}
}

// refused is the result of an attempt that its host's breaker did not let
// through (r says why).
func (s sender) refused(r *refusal) result {
	res := s.unsent(r.cause, true)
	res.refusal = r.detail
	return res
}

// answered reports whether the attempt got a response that the call does
// not retry: one that earns the retry budget ([BudgetConfig.Ratio]).
func (res *result) answered() bool {
	return res.certainty == Responded && !res.rule.failure && (res.rule.verdict == Stop || res.rule.verdict == Fail)
}

// observed describes res to the [Observer]: an attempt of the call whose
// key is key, with req as its request when it had none of its own.
func (res result) observed(key string, req *http.Request) Attempt {
	if res.req != nil {
		req = res.req
	}
	return Attempt{
		Request: req, Key: key, Number: res.number, Wire: res.wire,
		Certainty: res.certainty, Status: res.status, Problem: res.problem,
		RetryAfter: res.retryAfter, Err: res.err, Elapsed: res.elapsed, Hedge: res.hedge, Resend: res.resend,
	}
}

// recordLatency adds an attempt's latency to its host's, for a percentile
// hedge: a response that is not a failure of the host, or an attempt that
// lost its race (it took at least that long: leaving it out would bias the
// percentile down, the more so the slower the host gets).
func (s sender) recordLatency(ctx context.Context, res result) {
	if s.latencies == nil {
		return
	}
	if res.certainty == Responded && !res.rule.failure || context.Cause(ctx) == errHedgeLost {
		s.latencies.add(res.elapsed)
	}
}

// request builds the request of the next attempt: a clone of the caller's
// request with the key header and a fresh body.
func (c *call) request(ctx context.Context) (*http.Request, error) {
	r := c.req.Clone(ctx)
	if c.field != "" {
		r.Header[c.t.keyHeader] = []string{c.field} // Set, without canonicalising a canonical name
	}
	if c.t.deadlineHeader != "" { // the clock only when needed
		setDeadline(r, ctx, c.t.deadlineHeader, c.t.now())
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
func (s sender) settle(resp *http.Response, done context.CancelFunc, res *result) {
	res.status = resp.StatusCode
	res.retryAfter = s.retryAfter(resp.Header)
	if v := firstValue(resp.Header, wire.HeaderRateLimit); v != "" {
		if rl, ok := wire.ParseRateLimit(v, firstValue(resp.Header, wire.HeaderRateLimitPolicy)); ok {
			res.rateLimit = &rl
		}
	}
	ct := firstValue(resp.Header, "Content-Type")
	problem := resp.StatusCode >= 400 && wire.IsProblem(ct)
	limit := s.readAheadLimit(resp.StatusCode, problem)
	if limit <= 0 {
		if s.bounded {
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
	res.resp, res.body = resp, buf
	if problem {
		if p, ok := wire.ReadProblem(ct, bytes.NewReader(buf), maxProblemBytes); ok {
			res.problem = p.Name()
		}
	}
}

// retryAfter returns the wait a response asks for: retry-after-ms (the
// more precise, sent beside Retry-After by OpenAI's and Anthropic's APIs),
// else Retry-After; 0 when neither parses.
func (s sender) retryAfter(h http.Header) time.Duration {
	if v := firstValue(h, wire.HeaderRetryAfterMs); v != "" {
		if ra, ok := wire.ParseRetryAfterMs(v); ok {
			return ra
		}
	}
	if v := firstValue(h, wire.HeaderRetryAfter); v != "" { // the clock only when needed
		if ra, ok := wire.ParseRetryAfter(v, s.t.now()); ok {
			return ra
		}
	}
	return 0
}

// readAheadLimit says how much of a response's body to read before
// deciding: a problem document (problem: its Content-Type says so) where
// the table names the status (outcomes.go), the whole body (up to
// MaxBufferedBody) where the response may be returned and a cut could be
// retried, the start of an error's body for a [Classifier], else nothing.
func (s sender) readAheadLimit(code int, problem bool) int64 {
	switch {
	case namedStatus(code) && problem:
		return maxProblemBytes
	case s.safe && !namedStatus(code):
		return s.t.cfg.MaxBufferedBody
	case s.classified && code >= 400:
		return maxProblemBytes
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
