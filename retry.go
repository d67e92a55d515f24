package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// call is one RoundTrip: the attempts of one logical operation.
type call struct {
	t          *Transport
	req        *http.Request // the caller's, never modified
	opts       callOptions   // the request context's
	key, field string        // the bare key and the header value; "" for none
	safe       bool          // keyed or idempotent: an ambiguous attempt may be retried
	classified bool          // a Classifier is asked about each attempt
	hedged     bool          // attempts may be hedged (hedge.go)
	host       *hedgeHost    // the host's hedging state, when hedged
	body       requestBody
	max        int // Config.MaxAttempts, or the call's own

	gate      *hostBreaker  // the host's breaker, looked up at the first attempt; nil for none
	limiter   *limiter      // the host's limiter while the call holds one of its slots (limiter.go)
	looked    bool          // gate was looked up
	origin    string        // the host's name in the budget, "" until needed
	funded    token         // the budget's token for the next attempt, a retry, until it is sent
	attempts  int           // requests put on the wire
	retries   int           // retries made
	waited    time.Duration // waited for the host's breaker and the budget, in all
	prevWait  time.Duration // the previous backoff wait
	mayActed  bool          // some attempt may have taken effect
	lastRetry time.Duration // the latest Retry-After seen
	resend    Resend        // why the current attempt re-sends the request, zero for the first
}

// decision is what the call does after an attempt.
type decision struct {
	verdict Verdict       // Retry, InFlight, Stop or Fail
	wait    time.Duration // before a retry; 0: Retry-After or the backoff
	reason  error         // Fail's sentinel
	detail  string        // a sentence for Fail's error
}

// newCall returns the call of req. It returns a value, not a pointer, so
// that the call can live on RoundTrip's stack.
func (t *Transport) newCall(req *http.Request) (call, error) {
	opts := optionsOf(req.Context())
	key, field, err := t.requestKey(req, &opts)
	if err != nil {
		return call{}, &Error{Method: req.Method, URL: redact(req), Certainty: NotSent, Reason: ErrKeyInvalid, Err: err}
	}
	body, err := newRequestBody(req, t.cfg.BufferRequestBody)
	if err != nil {
		return call{}, &Error{Method: req.Method, URL: redact(req), Key: key, Certainty: NotSent, Err: err}
	}
	c := call{
		t: t, req: req, opts: opts, key: key, field: field,
		safe:       key != "" || isIdempotent(req.Method),
		classified: opts.classifier != nil || t.cfg.Classifier != nil,
		body:       body,
		max:        t.cfg.MaxAttempts,
	}
	if opts.maxAttempts > 0 {
		c.max = opts.maxAttempts
	}
	t.hedge.prepare(&c)
	return c, nil
}

// run makes attempts until one gives a response to return, an error to
// return, or no retry is allowed.
func (c *call) run() (*http.Response, error) {
	defer c.body.release()
	ctx := c.req.Context()
	for {
		if err := ctx.Err(); err != nil {
			c.refund(true)
			return nil, c.giveUp(c.sender(c.attempts+1, false).unsent(nil, false), nil, err, "the context ended before the attempt")
		}
		res, d, actedBefore := c.step(ctx)
		if ctx.Err() != nil && d.verdict != Stop && !res.open { // a refusal says why it waited in vain
			discard(res.resp)
			return nil, c.giveUp(res, nil, ctx.Err(), "the context ended")
		}
		switch {
		case d.verdict == Stop:
			return res.resp, nil
		case d.verdict == Fail:
			discard(res.resp)
			return nil, c.giveUp(res, d.reason, res.err, d.detail)
		case c.attempts >= c.max:
			return c.exhausted(res, d, actedBefore)
		}
		if err := c.wait(ctx, res, d); err != nil {
			return nil, err
		}
	}
}

// step makes the next attempt, hedged when the call allows it, and decides
// what follows it. actedBefore says whether an attempt before it may have
// taken effect.
func (c *call) step(ctx context.Context) (res result, d decision, actedBefore bool) {
	tk, res, ok := c.admit(ctx)
	c.refund(!ok)
	if ok {
		defer func() { c.releaseSlot(res) }()
	}
	if ok && c.hedged {
		if delay, hedged := c.t.hedge.delay(c.host); hedged {
			return c.race(ctx, delay, tk)
		}
	}
	if ok {
		res = c.attempt(ctx, tk)
	}
	actedBefore = c.mayActed
	d = c.conclude(ctx, res)
	return res, d, actedBefore
}

// admit waits for the call's host to let its next attempt through: its
// announced quota (pacer.go), its breaker (hostBreaker.admit), then its
// concurrency limit (limiter.go), so that no call holds a slot while it
// waits for the breaker. When the host does not, it returns the refused
// attempt's result and false.
func (c *call) admit(ctx context.Context) (ticket, result, bool) {
	if r := c.pace(ctx); r != nil {
		return ticket{}, c.refusedBy(r, ErrRateLimited), false
	}
	var tk ticket
	if h := c.breaker(); h != nil {
		var waited time.Duration
		var r *refusal
		tk, waited, r = h.admit(ctx, func() waitPolicy { return c.waitPolicy(0) })
		c.waited += waited
		if r != nil {
			return ticket{}, c.sender(c.attempts+1, false).refused(r), false
		}
	}
	if r := c.slot(ctx, tk); r != nil {
		tk.end(errAttemptExcluded, 0) // not sent: the breaker learns nothing of it
		return ticket{}, c.refusedBy(r, ErrOverloaded), false
	}
	return tk, result{}, true
}

// refusedBy is the result of an attempt that a local gate other than the
// breaker refused (r says why, reason names the gate).
func (c *call) refusedBy(r *refusal, reason error) result {
	res := c.sender(c.attempts+1, false).refused(r)
	res.gate = reason
	return res
}

// breaker returns the breaker of the call's host, nil when the breakers
// are disabled. It looks it up once per call, on the caller's goroutine.
func (c *call) breaker() *hostBreaker {
	if !c.looked {
		c.gate, c.looked = c.t.breakers.host(c.req.URL), true
	}
	return c.gate
}

// waitPolicy returns how long the call may wait for a local refusal to
// pass when a wait of d must follow it: until the context's deadline less
// d, and at most what is left of [Config.MaxWait].
func (c *call) waitPolicy(d time.Duration) waitPolicy {
	p := waitPolicy{failFast: c.t.cfg.FailFast || c.opts.failFast, newTimer: c.t.newTimer}
	if p.failFast {
		return p
	}
	now := c.t.now()
	if c.t.cfg.MaxWait > 0 {
		p.until, p.bound = now.Add(c.t.cfg.MaxWait-c.waited), "its wait bound (MaxWait)"
	}
	deadline, ok := c.req.Context().Deadline()
	if ok {
		p.deadline = deadline
	}
	if ok && (p.until.IsZero() || deadline.Add(-d).Before(p.until)) {
		p.until, p.bound = deadline.Add(-d), "the context's deadline"
		if d > 0 {
			p.bound = fmt.Sprintf("the context's deadline less the wait of %s before the retry", d.Round(time.Millisecond))
		}
	}
	return p
}

// conclude records an attempt and decides what follows it. When the
// caller's code panics meanwhile (an OnAttempt hook, a [Classifier]), the
// attempt's response is closed: nothing else would.
func (c *call) conclude(ctx context.Context, res result) decision {
	concluded := false
	defer func() {
		if !concluded && res.resp != nil {
			res.resp.Body.Close()
		}
	}()
	c.record(res)
	d := c.judge(ctx, res)
	if d.verdict == InFlight {
		c.mayActed = true
	}
	concluded = true
	return d
}

// record counts an attempt, earns the budget its answer, and reports it to
// the [Observer].
func (c *call) record(res result) {
	c.attempts += res.wire
	if c.t.budget != nil && res.answered() {
		c.t.budget.answered(c.hostName())
	}
	if res.retryAfter > 0 {
		c.lastRetry = res.retryAfter
	}
	c.learnQuota(res)
	if res.rule.acted {
		c.mayActed = true
	}
	c.t.cfg.Observer.attempt(c.describe(res))
}

// judge decides what follows an attempt: what the local checks, the
// call's Classifiers or the outcome table (outcomes.go) say, within what
// is safe (docs/CONTRACT.md §8).
func (c *call) judge(ctx context.Context, res result) decision {
	switch {
	case res.open && res.gate != nil:
		return decision{verdict: Fail, reason: res.gate, detail: res.refusal}
	case res.open:
		return decision{verdict: Fail, reason: ErrCircuitOpen, detail: res.refusal}
	case errors.Is(res.err, ErrNotRewindable):
		return decision{verdict: Fail, reason: ErrNotRewindable}
	}
	d := decision{verdict: Defer}
	if c.classified && ctx.Err() == nil {
		d = c.ask(res)
	}
	if d.verdict == Defer {
		d = res.rule.decide(c.safe, res.certainty)
	}
	return c.bound(d, res)
}

// decide returns the rule's decision for a request that is safe to retry
// after an ambiguous attempt (keyed or idempotent), or not.
func (r *rule) decide(safe bool, certainty Certainty) decision {
	switch {
	case r.verdict == Fail:
		return decision{verdict: Fail, reason: r.reason}
	case r.verdict != Retry || !r.safeOnly || safe:
		return decision{verdict: r.verdict}
	case certainty == Ambiguous:
		return decision{verdict: Fail, reason: ErrOutcomeUnknown, detail: noKeyDetail}
	}
	return decision{verdict: Stop}
}

const noKeyDetail = "the request has no idempotency key and its method is not idempotent, so it was not retried"

// bound keeps a decision within what is safe and possible: no retry of an
// ambiguous attempt that neither a key nor the method makes safe, none of
// a body that cannot be re-sent, no in-flight wait without a key, and no
// Stop without a response.
func (c *call) bound(d decision, res result) decision {
	switch {
	case (d.verdict == Retry || d.verdict == InFlight) && res.certainty == Ambiguous && !c.safe:
		return decision{verdict: Fail, reason: ErrOutcomeUnknown, detail: noKeyDetail}
	case d.verdict == InFlight && c.key == "":
		d.verdict = Stop
	case (d.verdict == Retry || d.verdict == InFlight) && !c.body.resendable():
		return decision{verdict: Fail, reason: ErrNotRewindable, detail: c.body.why()}
	}
	if d.verdict == Stop && res.resp == nil {
		return decision{verdict: Fail, detail: "a Classifier stopped the call"}
	}
	return d
}

// ask returns the decision of the call's Classifiers, the call's own first;
// Defer when both defer.
func (c *call) ask(res result) decision {
	o := c.outcome(res)
	for _, cl := range [2]Classifier{c.opts.classifier, c.t.cfg.Classifier} {
		if cl == nil {
			continue
		}
		switch d := cl(o); d.Verdict {
		case Retry, InFlight, Stop:
			return decision{verdict: d.Verdict, wait: max(d.Wait, 0)}
		case Fail:
			return decision{verdict: Fail, reason: d.Err, detail: "a Classifier failed the call"}
		}
	}
	return decision{verdict: Defer}
}

// outcome describes an attempt to a [Classifier].
func (c *call) outcome(res result) Outcome {
	o := Outcome{
		Request: res.req, Key: c.key, Attempts: c.attempts, Certainty: res.certainty,
		Err: res.err, Problem: res.problem, Body: res.body,
	}
	if res.resp != nil {
		o.Status, o.Header = res.status, res.resp.Header
	}
	return o
}

// exhausted ends a call whose last allowed attempt asked for a retry. The
// last response is returned as it is, unless an earlier attempt may have
// acted (actedBefore: a 5xx, a lost response), when the last response says
// nothing of the operation's outcome, or it was in flight (409
// key-in-flight), which says that an attempt of the key is still running:
// then the error says that it may have taken effect.
func (c *call) exhausted(res result, d decision, actedBefore bool) (*http.Response, error) {
	if res.resp != nil && !actedBefore && d.verdict != InFlight {
		return res.resp, nil
	}
	discard(res.resp)
	reason := ErrAttemptsExhausted
	if d.verdict == InFlight {
		reason = ErrKeyInFlight
	}
	return nil, c.giveUp(res, reason, res.err, "")
}

// wait sleeps before the next attempt, unless the wait cannot end before
// the context's deadline or the budget has no token for the retry (a call
// that is not fail-fast waits for one first); then, or when the context
// ends during the wait, it returns the call's error.
func (c *call) wait(ctx context.Context, res result, dec decision) error {
	discard(res.resp)
	d, why := c.delay(res, dec.wait)
	if deadline, ok := ctx.Deadline(); ok {
		if left := deadline.Sub(c.t.now()); d >= left {
			return c.giveUp(res, ErrDeadline, res.err,
				fmt.Sprintf("the next wait of %s (%s) would end past the context deadline, %s away",
					d.Round(time.Millisecond), why, left.Round(time.Millisecond)))
		}
	}
	if err := c.token(ctx, d); err != nil {
		cause := err.cause
		if cause == nil {
			cause = res.err
		}
		return c.giveUp(res, ErrBudgetExhausted, cause, err.detail)
	}
	c.t.cfg.Observer.retry(c.describe(res), d)
	if c.t.log.Enabled(ctx, slog.LevelDebug) { // the attributes cost allocations
		c.t.log.LogAttrs(ctx, slog.LevelDebug, "idem: retrying", append(logAttrs(c, res), slog.Duration("wait", d))...)
	}
	if err := c.t.sleep(ctx, d); err != nil {
		return c.giveUp(res, nil, err, "the context ended during the wait before a retry")
	}
	c.retries++
	c.resend = Resend{Certainty: res.certainty, Status: res.status, Problem: res.problem, Wait: d}
	return nil
}

// token takes a token of the budget for a retry that d will precede; a
// call that is not fail-fast waits for one (Budget), a critical call
// always has one ([WithCritical]).
func (c *call) token(ctx context.Context, d time.Duration) *refusal {
	switch {
	case c.t.budget == nil:
		return nil
	case c.opts.critical:
		c.t.budget.spend(c.hostName())
		return nil
	}
	tk, waited, r := c.t.budget.wait(ctx, c.hostName(), func() waitPolicy { return c.waitPolicy(d) })
	c.waited += waited
	c.funded = tk
	return r
}

// refund gives the budget back the token of a retry that was not sent
// (unsent: its host's breaker refused it, or its context ended first), and
// forgets it once the retry is sent.
func (c *call) refund(unsent bool) {
	if unsent && c.t.budget != nil {
		c.t.budget.refund(c.funded)
	}
	c.funded = token{}
}

// hostName returns the name of the call's host in the budget: its breaker's
// (scheme://host:port), built once per call.
func (c *call) hostName() string {
	if c.origin == "" {
		if h := c.breaker(); h != nil {
			c.origin = h.name
		} else {
			c.origin = string(appendHostKey(nil, c.req.URL))
		}
	}
	return c.origin
}

// spend takes a token of the budget for a hedge, reporting whether the
// call may send it; a hedge never waits, and a critical call always may
// ([WithCritical]). The token is given back (Budget.refund) when the
// hedge is not sent after all; a critical call's is the zero token.
func (c *call) spend() (token, bool) {
	switch {
	case c.t.budget == nil:
		return token{}, true
	case c.opts.critical:
		c.t.budget.spend(c.hostName())
		return token{}, true
	}
	return c.t.budget.allowRetry(c.hostName())
}

// delay returns the wait before the next attempt, and where it comes from:
// a [Classifier]'s wait, Retry-After, or the backoff.
func (c *call) delay(res result, wait time.Duration) (time.Duration, string) {
	if wait > 0 {
		return wait, "a Classifier's wait"
	}
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
		MayHaveTakenEffect: c.mayActed, Waited: c.waited,
	}
	err.setStanding(res.resp)
	c.t.cfg.Observer.giveUp(c.describe(res), err)
	if ctx := c.req.Context(); c.t.log.Enabled(ctx, slog.LevelInfo) {
		c.t.log.LogAttrs(ctx, slog.LevelInfo, "idem: giving up", append(logAttrs(c, res), slog.Any("error", err))...)
	}
	return err
}

// describe reports an attempt to the [Observer].
func (c *call) describe(res result) Attempt { return res.observed(c.key, c.req) }

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
