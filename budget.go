package idem

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrBudgetExhausted: the retry budget had no token for a retry, so the
// call ended with an *Error that describes its last attempt (status,
// certainty) instead of adding load to a service that is failing: the call
// was fail-fast ([Config.FailFast], [WithFailFast]), or it waited for a token
// and its deadline, its wait bound ([Config.MaxWait]) or its context came
// first. It is a local decision of this client, not an error from the
// server.
var ErrBudgetExhausted = errors.New("idem: retry budget exhausted (a local decision of this client, not a server error)")

// Defaults of [BudgetConfig], as its fields' docs state them.
const (
	defaultBudgetRatio     = 2
	defaultBudgetMaxEarned = 100
	defaultBudgetFloorRate = 10
	defaultBudgetFloor     = 10
)

// BudgetConfig configures a Budget. Its zero value gives the defaults listed
// with each field.
type BudgetConfig struct {
	// Ratio is how many retries each answered attempt earns: an attempt
	// that got a response the call does not retry (a 2xx, a 4xx other
	// than 408 and 429, a replay), so that the retries follow what the
	// service serves rather than what it is asked. 2 lets a service that
	// answers a third of its attempts or more have a retry for each
	// failure (a brownout of 40% failures, or a store so slow that half
	// the attempts time out, is ridden out), and one that answers none
	// only the floor: in a full outage retries add the floor and what was
	// saved, and nothing in proportion to the load (BENCHMARKS.md §4,
	// §11). It counts in thousandths. Zero or negative means 2.
	Ratio float64
	// MaxEarned caps the earned retries that can be saved up, so that a long
	// calm cannot fund a burst of retries when an outage starts. Zero or
	// negative means 100; at least 1.
	MaxEarned float64
	// FloorRate is how many retries per second are allowed beyond those
	// earned, so that a client with little traffic can still retry a little.
	// Zero means 10; negative means no floor.
	FloorRate float64
	// FloorBurst is how many floor retries can be taken at once. Zero or
	// negative means 10.
	FloorBurst int
}

// Budget is a token bucket of retries, kept per host. Every answered
// attempt earns its host Ratio retries (up to MaxEarned saved); every retry
// spends one that its host earned or, when none is left, one from a floor
// rate limiter shared by the hosts (FloorRate per second, bursts of
// FloorBurst). Over any window of length T, the retries to a host are
// therefore at most Ratio x its answered attempts + MaxEarned saved before
// it + FloorBurst + FloorRate x T.
//
// The earnings are per host (scheme, host and port, as the breakers name
// them) so that a host that answers nothing cannot spend what a healthy one
// earns: behind one client, one host's outage would otherwise take the
// tokens that the other host's own failures need, and its retries, which a
// dead host does not answer, would be funded by the other's answers. A
// retry that was not sent (its host's breaker refused it, or its context
// ended first) gives its token back.
//
// A retry that finds no token waits for one, in its host's queue, within
// its call's deadline and [Config.MaxWait]: a retry its host earns goes to
// the retry that has waited longest, and the floor serves the waiting
// retries in the order they asked (each holds a reservation of
// x/time/rate's limiter, when the floor can serve it in time). When a host
// recovers, its answers earn the tokens that release the waiting retries,
// one answer for one retry. A retry of a fail-fast call ([Config.FailFast],
// [WithFailFast]), and a hedge, never waits: without a token it is denied,
// and the call ends with an error matching [ErrBudgetExhausted] (a hedge is
// simply not sent).
//
// One Budget may be shared by several Transports (one per downstream service
// is typical); it is safe for concurrent use.
type Budget struct {
	// Earnings are kept in thousandths of a retry, so that ten answers at
	// 0.1 earn exactly one retry.
	ratio, maxEarned int64
	floor            *rate.Limiter // nil: no floor
	now              func() time.Time

	mu       sync.Mutex
	accounts map[string]*account // by host; only those that hold something
	stats    BudgetStats
}

// account is what one host's answers earned, and its retries waiting for a
// token.
type account struct {
	earned  int64
	waiting waitQueue[floorHold]
}

// floorHold is a waiting retry's reservation of the floor (nil for none),
// and when its token is due.
type floorHold struct {
	r  *rate.Reservation
	at time.Time
}

// maxAccounts bounds the hosts whose earnings a Budget keeps; past it, the
// earnings of a host without waiting retries are dropped.
const maxAccounts = 1024

// milli is one retry in the Budget's fixed-point accounting.
const milli = 1000

// BudgetStats counts what a Budget saw.
type BudgetStats struct {
	Answered int64 // answered attempts, each earning Ratio retries
	Retries  int64 // retries and hedges given a token
	Waited   int64 // of the Retries, those that waited for their token
	Denied   int64 // retries and hedges given none
	Returned int64 // of the Retries, tokens given back: the retry was not sent
}

// NewBudget returns a Budget configured by cfg, with nothing earned yet.
func NewBudget(cfg BudgetConfig) *Budget {
	return newBudget(cfg, time.Now)
}

func newBudget(cfg BudgetConfig, now func() time.Time) *Budget {
	orDefault(&cfg.Ratio, defaultBudgetRatio)
	orDefault(&cfg.MaxEarned, defaultBudgetMaxEarned)
	orDefault(&cfg.FloorBurst, defaultBudgetFloor)
	if cfg.FloorRate == 0 { // negative: no floor
		cfg.FloorRate = defaultBudgetFloorRate
	}
	b := &Budget{
		ratio:     max(1, int64(math.Round(cfg.Ratio*milli))),
		maxEarned: max(milli, int64(math.Round(cfg.MaxEarned*milli))),
		now:       now,
		accounts:  map[string]*account{},
	}
	if cfg.FloorRate > 0 {
		b.floor = rate.NewLimiter(rate.Limit(cfg.FloorRate), cfg.FloorBurst)
	}
	return b
}

// Stats returns what the Budget counted so far.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// account returns host's account, creating it when needed. The caller
// must call tidy when done with it.
func (b *Budget) account(host string) *account {
	if a, ok := b.accounts[host]; ok {
		return a
	}
	if len(b.accounts) >= maxAccounts {
		for h, a := range b.accounts {
			if a.waiting.len() == 0 {
				delete(b.accounts, h)
				break
			}
		}
	}
	a := &account{}
	b.accounts[host] = a
	return a
}

// tidy drops host's account when it holds nothing.
func (b *Budget) tidy(host string, a *account) {
	if a.earned == 0 && a.waiting.len() == 0 {
		delete(b.accounts, host)
	}
}

// answered records an answered attempt to host, which earns it Ratio
// retries; the retries to host that wait for a token get them first,
// oldest first.
func (b *Budget) answered(host string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.Answered++
	a := b.account(host)
	a.earned = min(a.earned+b.ratio, b.maxEarned)
	b.serve(a)
	b.tidy(host, a)
}

// serve gives the account's earned retries to its waiting retries, oldest
// first.
func (b *Budget) serve(a *account) {
	for a.earned >= milli && a.waiting.len() > 0 {
		a.earned -= milli
		b.grant(a.waiting.take(a.waiting.front()))
	}
}

// token is what funded a retry: a retry its host earned, or a reservation
// of the floor. The zero token funds nothing.
type token struct {
	host   string
	earned bool
	floor  *rate.Reservation
}

// refund gives back the token of a retry that was not sent: to its
// host's account (and its waiting retries), or to the floor.
func (b *Budget) refund(tk token) {
	if !tk.earned && tk.floor == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.Returned++
	if tk.floor != nil {
		tk.floor.CancelAt(b.now())
		return
	}
	a := b.account(tk.host)
	a.earned = min(a.earned+milli, b.maxEarned)
	b.serve(a)
	b.tidy(tk.host, a)
}

// allowRetry takes one token for a retry or a hedge to host that does not
// wait, reporting whether there was one.
func (b *Budget) allowRetry(host string) (token, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if tk, ok := b.take(host); ok {
		return tk, true
	}
	b.stats.Denied++
	return token{}, false
}

// take takes a token for a retry to host, earned or of the floor, when one
// is left now.
func (b *Budget) take(host string) (token, bool) {
	tk := token{host: host}
	if a, ok := b.accounts[host]; ok && a.earned >= milli {
		a.earned -= milli
		b.tidy(host, a)
		tk.earned = true
	} else if tk.floor = b.reserveNow(); tk.floor == nil {
		return token{}, false
	}
	b.stats.Retries++
	return tk, true
}

// reserveNow takes a floor token when one is left now, nil when none is.
func (b *Budget) reserveNow() *rate.Reservation {
	if b.floor == nil {
		return nil
	}
	now := b.now()
	r := b.floor.ReserveN(now, 1)
	if !r.OK() {
		return nil
	}
	if r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		return nil
	}
	return r
}

// spend takes a token for a retry to host that is made whatever the budget
// holds (a critical call's, [WithCritical]): an earned retry or a floor
// token when one is left, so that the budget sees the load, and never a
// denial.
func (b *Budget) spend(host string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.take(host); !ok {
		b.stats.Retries++
	}
}

// grant gives w an earned token; its floor reservation goes back.
func (b *Budget) grant(w *waiter[floorHold]) {
	if w.value.r != nil {
		w.value.r.CancelAt(b.now())
		w.value.r = nil
	}
	w.done = true
	b.stats.Retries++
	b.stats.Waited++
	w.signal()
}

// wait takes a token for a retry to host, waiting for one when there is
// none (see Budget), and returns it and how long it waited; policy, asked
// only when there is none, says how long it may wait. It returns a
// *refusal at once when the policy is fail-fast, and when ctx ends or the
// policy's until passes first.
func (b *Budget) wait(ctx context.Context, host string, policy func() waitPolicy) (token, time.Duration, *refusal) {
	b.mu.Lock()
	if a, ok := b.accounts[host]; !ok || a.waiting.len() == 0 {
		if tk, ok := b.take(host); ok {
			b.mu.Unlock()
			return tk, 0, nil
		}
	}
	p := policy()
	start := b.now()
	if p.failFast || !p.until.IsZero() && !start.Before(p.until) {
		b.stats.Denied++
		b.mu.Unlock()
		if p.failFast {
			return token{}, 0, &refusal{detail: "the retry budget had no token and the call is fail-fast"}
		}
		return token{}, 0, &refusal{detail: fmt.Sprintf("the retry budget had no token and %s has come", p.bound), cause: p.ended(start)}
	}
	a := b.account(host)
	w := newWaiter[floorHold](p.deadline)
	e := a.waiting.push(w)
	b.reserveFloor(w, start, p.until)
	next := p.until
	if w.value.r != nil {
		next = w.value.at
	}
	var timerC <-chan time.Time
	if !next.IsZero() {
		timer := p.newTimer(max(next.Sub(start), 0))
		defer timer.Stop()
		timerC = timer.C
	}
	w.park(ctx, &b.mu, timerC)
	defer b.mu.Unlock()
	return b.settle(ctx, host, a, e, start, p)
}

// settle ends the wait of the retry at e in host's account a: granted an
// earned token, served by its floor reservation, or refused.
func (b *Budget) settle(ctx context.Context, host string, a *account, e *list.Element, start time.Time, p waitPolicy) (token, time.Duration, *refusal) {
	w := a.waiting.at(e)
	now := b.now()
	waited := now.Sub(start)
	switch {
	case w.done:
		return token{host: host, earned: true}, waited, nil
	case w.value.r != nil && !now.Before(w.value.at):
		a.waiting.take(e)
		b.tidy(host, a)
		b.stats.Retries++
		b.stats.Waited++
		return token{host: host, floor: w.value.r}, waited, nil
	}
	a.waiting.take(e)
	b.tidy(host, a)
	if w.value.r != nil {
		w.value.r.CancelAt(now)
	}
	b.stats.Denied++
	r := &refusal{detail: fmt.Sprintf("the retry waited %s for a token of the retry budget until %s",
		waited.Round(time.Millisecond), p.bound), cause: ctx.Err()}
	if r.cause != nil {
		r.detail = fmt.Sprintf("the retry waited %s for a token of the retry budget and the context ended first",
			waited.Round(time.Millisecond))
	} else {
		r.cause = p.ended(now)
	}
	return token{}, waited, r
}

// reserveFloor reserves a floor token for w when the floor can serve it
// before until (zero: any time).
func (b *Budget) reserveFloor(w *waiter[floorHold], now, until time.Time) {
	if b.floor == nil {
		return
	}
	r := b.floor.ReserveN(now, 1)
	if !r.OK() {
		return
	}
	at := now.Add(r.DelayFrom(now))
	if !until.IsZero() && !at.Before(until) {
		r.CancelAt(now)
		return
	}
	w.value = floorHold{r: r, at: at}
}
