package idem

import (
	"context"
	"errors"
	"net/http/httptrace"
	"runtime"
	"time"
)

// Defaults of [HedgeConfig], as its fields' docs state them.
const (
	defaultHedgeWindow        = 256
	defaultHedgeMinSamples    = 32
	defaultHedgeInFlightShare = 0.1
)

// HedgeConfig configures hedged requests. Its zero value disables them.
//
// When an attempt has not completed after the hedge delay, a hedge (a copy
// of the request) is sent beside it; the first attempt whose outcome ends
// the call (a response to return, or a typed error) wins, and the others
// are cancelled. An outcome that asks for a retry (a 503, a reset) while
// another attempt still runs is dropped, and the call waits for the other;
// so is a hedge that could not be sent (its host's breaker refused it, or
// its body could not be built), after which no further hedge is tried.
// Hedges cut the tail latency that a slow server instance or a lost packet
// adds, for a few extra requests: each hedge spends a token of the retry
// budget and counts toward MaxAttempts, and the hedges in flight to a
// host are bounded (InFlightShare). A hedge is an attempt like any other
// to its host's gates: it takes a slot of its concurrency limit
// ([Config.ConcurrencyLimit]) and of the pace of its announced quota, but
// waits for none of them: a hedge that cannot have a token, a slot or the
// pace at once is not sent, and the call goes on with the attempt it has.
//
// Only requests that are safe to send twice at once are hedged: those with
// an idempotent method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) and, with
// [WithHedging], keyed requests of any method. Their body must have GetBody
// (or be buffered, see [Config.BufferRequestBody]).
type HedgeConfig struct {
	// Delay is how long an attempt runs before a hedge is sent. With
	// Percentile set, it is the delay used until the host has MinSamples
	// latencies; zero then means no hedge until it has. Zero, with
	// Percentile zero, disables hedging.
	Delay time.Duration
	// Percentile, in (0, 1), sets the delay to that quantile of the host's
	// recent latencies: 0.95 hedges the attempts slower than 95% of recent
	// ones, so about 5% of calls send a hedge. A latency is the time from
	// sending an attempt to its response read ahead, counted for responses
	// that are not failures of the host (see [BreakerConfig]), of the
	// requests that may be hedged; an attempt cancelled because another
	// won counts the time until then, a lower bound of its latency, so
	// that the percentile rises when the host slows down. Zero means the
	// fixed Delay; a value outside (0, 1) is clamped into it.
	Percentile float64
	// Window is how many of a host's latest latencies the percentile is
	// taken from. Zero or negative means 256.
	Window int
	// MinSamples is how many latencies a host needs before the percentile
	// is used. Zero or negative means 32; at most Window.
	MinSamples int
	// MaxHedges bounds the hedges sent for one attempt, one after each
	// delay. Zero or negative means 1.
	MaxHedges int
	// InFlightShare bounds the hedges in flight to a host: counting the
	// new one in both, the hedges may be at most this share of the
	// host's attempts in flight, or else at most MaxHedges, so that a
	// lone call may always hedge. The attempts counted are those of the
	// calls that may be hedged, once the delay is known (with a
	// percentile, after MinSamples), each until its response is read
	// ahead. When many attempts are slow at once, the host or the path to
	// it is congested rather than one instance slow: hedging each of them
	// would add load where it hurts, and the hedges would be as slow. A
	// hedge the bound denies spends no budget, and its attempt runs on
	// without hedges (trying again after each delay cost more than it
	// saved: BENCHMARKS.md §9). Zero, negative or NaN means 0.1; 1 or
	// more bounds the hedges by MaxHedges alone.
	InFlightShare float64
}

// hedger is a Transport's hedging policy.
type hedger struct {
	cfg   HedgeConfig
	hosts *hedgeHosts
}

// newHedger returns the policy of cfg, nil when hedging is off. maxHosts
// bounds the hosts whose latencies are kept ([BreakerConfig.MaxHosts]).
func newHedger(cfg HedgeConfig, maxHosts int) *hedger {
	if cfg.Delay <= 0 && cfg.Percentile <= 0 {
		return nil
	}
	cfg.MaxHedges = max(cfg.MaxHedges, 1)
	if cfg.Window <= 0 {
		cfg.Window = defaultHedgeWindow
	}
	if cfg.MinSamples <= 0 {
		cfg.MinSamples = defaultHedgeMinSamples
	}
	cfg.MinSamples = min(cfg.MinSamples, cfg.Window)
	if !(cfg.InFlightShare > 0) { // NaN too
		cfg.InFlightShare = defaultHedgeInFlightShare
	}
	if cfg.Percentile > 0 {
		cfg.Percentile = min(cfg.Percentile, 0.999999)
	}
	if maxHosts <= 0 {
		maxHosts = defaultBreakerMaxHosts
	}
	return &hedger{cfg: cfg, hosts: &hedgeHosts{q: cfg.Percentile, window: cfg.Window,
		minSamples: cfg.MinSamples, max: maxHosts, byHost: map[string]*hedgeHost{}}}
}

// prepare marks c as hedged when the policy allows it: c may make a second
// attempt, its body can be sent twice at once, and its method is idempotent
// or it is keyed and opted in ([WithHedging]).
func (h *hedger) prepare(c *call) {
	switch {
	case h == nil || c.max < 2 || !c.body.rewindable():
		return
	case !isIdempotent(c.req.Method) && (c.key == "" || !c.opts.hedge):
		return
	}
	c.hedged = true
	c.host = h.hosts.lookup(c.req.URL)
}

// delay returns the wait before a hedge to host, and false when there is
// none yet.
func (h *hedger) delay(host *hedgeHost) (time.Duration, bool) {
	if host.latencies != nil {
		if d, ok := host.latencies.get(); ok {
			return d, true
		}
	}
	return h.cfg.Delay, h.cfg.Delay > 0
}

// raced is the result of one attempt of a race.
type raced struct {
	res      result
	id       int  // the attempt's index in race.cancels
	panicked any  // what the attempt panicked with (the base transport, or an Observer hook), nil when it did not
	exited   bool // the attempt's goroutine ended by runtime.Goexit (a test's FailNow in a base transport)
}

// errHedgeLost is the cause of the context of an attempt that another
// attempt of its race beat.
var errHedgeLost = errors.New("idem: another attempt of the hedged call won")

// race is one step of a hedged call: an attempt and its hedges.
type race struct {
	results chan raced
	cancels []context.CancelCauseFunc // of each attempt, by id
	running int                       // attempts whose result has not arrived
	hedges  int                       // hedges sent
}

// race makes an attempt and, while none has completed, hedges of it, the
// first after delay and one after each hedge delay since, as long as
// MaxHedges, MaxAttempts, the host's hedges in flight and the budget
// allow: the first hedge one of them refuses is the race's last, as is a
// hedge that could not be sent. The first attempt whose decision ends the
// call (Stop, Fail) wins, or else the last to complete; the others are
// cancelled. An attempt that was not sent never wins while another runs:
// the call waits for the attempt on the wire, whose outcome it must know.
// It returns the winner as step does. An attempt that panicked (or called
// runtime.Goexit) does so again on the caller's goroutine, as an unhedged
// attempt would; then, or when the caller's own code panics (a
// [Classifier], an [Observer] hook), the other attempts are cancelled.
func (c *call) race(ctx context.Context, delay time.Duration, tk ticket) (result, decision, bool) {
	h := c.t.hedge
	r := &race{results: make(chan raced, 1+h.cfg.MaxHedges)}
	settled := false
	defer func() {
		if !settled {
			c.abandonRace(r)
		}
	}()
	c.launch(ctx, r, false, tk, nil)
	timer := c.t.newTimer(delay)
	defer timer.Stop()
	timerC := timer.C
	for {
		select {
		case x := <-r.results:
			r.running--
			switch {
			case x.panicked != nil:
				panic(x.panicked) // on the caller's goroutine; the deferred abandonRace cancels the others
			case x.exited:
				runtime.Goexit()
			}
			actedBefore := c.mayActed
			d := c.conclude(ctx, x.res)
			if x.res.certainty == NotSent && r.running > 0 {
				// Not sent (its body failed, its breaker refused it) while
				// another attempt is on the wire: it ends nothing, and no
				// further hedge would be sent either.
				timerC = nil
				continue
			}
			if d.verdict == Stop || d.verdict == Fail || r.running == 0 {
				settled = true
				c.settleRace(r, x)
				return x.res, d, actedBefore
			}
			discard(x.res.resp) // asked for a retry while another attempt runs
			r.cancels[x.id](nil)
		case <-timerC:
			timerC = nil
			if !c.hedge(ctx, r) {
				continue
			}
			if d, ok := h.delay(c.host); ok && r.hedges < h.cfg.MaxHedges {
				timer.Reset(d)
				timerC = timer.C
			}
		}
	}
}

// hedge sends a hedge when MaxHedges, MaxAttempts, the context, the
// host's hedges in flight, its breaker, its concurrency limit, the budget
// and its announced quota allow, reporting whether it did. A hedge waits
// for none of them: one that cannot go at once is not sent, and the call
// goes on with the attempts it has.
func (c *call) hedge(ctx context.Context, r *race) bool {
	cfg := c.t.hedge.cfg
	if r.hedges >= cfg.MaxHedges || c.attempts+r.running >= c.max || ctx.Err() != nil {
		return false
	}
	if !c.host.admitHedge(cfg.InFlightShare, cfg.MaxHedges) {
		return false
	}
	var tk ticket
	var slot *limiter
	var funded token
	sent := false
	defer func() { // a hedge not sent gives back what it took
		if !sent {
			c.host.release()
			tk.end(errAttemptExcluded, 0)
			if slot != nil {
				slot.release(0, noSign, c.t.now)
			}
			if c.t.budget != nil {
				c.t.budget.refund(funded)
			}
		}
	}()
	if h := c.breaker(); h != nil {
		var ok bool
		if tk, ok = h.hedge(); !ok {
			return false
		}
	}
	ok := false
	if slot, ok = c.hedgeSlot(); !ok {
		return false
	}
	if funded, ok = c.spend(); !ok || !c.paceHedge() {
		return false
	}
	r.hedges++
	sent = true // launch takes over the ticket and the slot, and ends them when the request cannot be built
	launched := false
	defer func() { // the caller's GetBody panicked in launch
		if !launched {
			c.host.release()
		}
	}()
	c.launch(ctx, r, true, tk, slot)
	launched = true
	return true
}

// launch starts an attempt of the race, which its host's breaker let
// through (tk), on a goroutine of its own, under a context that the race
// cancels when another attempt wins. The attempt counts as running in the
// race once its request is built (a GetBody that panics leaves nothing to
// wait for, and its ticket goes back), and as in flight to its host from
// then until it ends; a hedge whose request cannot be built is released.
// slot is the hedge's slot of the host's concurrency limit (nil for none),
// given back when the attempt ends.
func (c *call) launch(ctx context.Context, r *race, hedge bool, tk ticket, slot *limiter) {
	host := c.host
	hctx, cancel := context.WithCancelCause(ctx)
	id := len(r.cancels)
	r.cancels = append(r.cancels, cancel)
	actx, done := c.t.attemptContext(hctx, tk)
	trace := newWireTrace(c.t.tracedBase)
	built := false
	defer func() {
		if !built {
			tk.end(errAttemptExcluded, 0)
			if slot != nil {
				slot.release(0, noSign, c.t.now)
			}
		}
	}()
	req, err := c.request(httptrace.WithClientTrace(actx, &trace.hooks))
	built = err == nil
	r.running++ // a result will come
	s, results := c.sender(c.attempts+r.running, hedge), r.results
	s.bounded = c.t.cfg.AttemptTimeout > 0 || tk.limit > 0
	if err != nil {
		done()
		if hedge {
			host.release()
		}
		results <- raced{res: s.unsent(err, false), id: id}
		return
	}
	host.started()
	go func() {
		x := raced{id: id}
		returned := false
		defer func() {
			// A panic or a Goexit here could not be seen by the caller: it
			// is handed to the race, which repeats it on the caller's
			// goroutine. (Under GODEBUG=panicnil=1 a panic(nil) looks like
			// a Goexit.)
			if x.panicked = recover(); x.panicked == nil && !returned {
				x.exited = true
			}
			host.ended(hedge)
			if slot != nil {
				slot.releaseAfter(x.res, context.Cause(hctx) == errHedgeLost, c.t.now)
			}
			results <- x
		}()
		x.res = s.send(hctx, req, trace, done, tk)
		returned = true
	}()
}

// abandonRace ends a race that no attempt won (one panicked, or the
// caller's code did): the attempts are cancelled, and the results still to
// come drained.
func (c *call) abandonRace(r *race) {
	for _, cancel := range r.cancels {
		cancel(nil)
	}
	if r.running > 0 {
		go drainRace(r.results, r.running)
	}
}

// settleRace ends a race that x won: the other attempts are cancelled and
// counted, their late results drained; the winner's context ends when its
// response body is closed, or now when it has none.
func (c *call) settleRace(r *race, x raced) {
	for id, cancel := range r.cancels {
		if id != x.id {
			cancel(errHedgeLost)
		}
	}
	won := r.cancels[x.id]
	if x.res.resp != nil {
		x.res.resp.Body = &cancelOnClose{ReadCloser: x.res.resp.Body, done: func() { won(nil) }}
	} else {
		won(nil)
	}
	if r.running > 0 {
		c.attempts += r.running // on the wire, or about to be: counted as sent
		c.mayActed = true       // and, cancelled there, may have taken effect
		go drainRace(r.results, r.running)
	}
}

// drainRace receives the results of n cancelled attempts, and discards
// their responses.
func drainRace(results <-chan raced, n int) {
	for range n {
		discard((<-results).res.resp)
	}
}
