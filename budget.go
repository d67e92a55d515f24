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

// Budget is a token bucket of retries. Every answered attempt earns Ratio
// retries (up to MaxEarned saved); every retry spends one earned retry or,
// when none is left, one from a floor rate limiter (FloorRate per second,
// bursts of FloorBurst). Over any window of length T, retries are therefore
// at most Ratio x answered attempts + MaxEarned saved before it +
// FloorBurst + FloorRate x T.
//
// A retry that finds no token waits for one, in a queue, within its call's
// deadline and [Config.MaxWait]: an earned retry goes to the retry that has
// waited longest, and the floor serves the waiting retries in the order
// they asked (each holds a reservation of x/time/rate's limiter, when the
// floor can serve it in time). When a service recovers, its answers earn
// the tokens that release the waiting retries, one answer for one retry. A
// retry of a fail-fast call ([Config.FailFast], [WithFailFast]), and a hedge,
// never waits: without a token it is denied, and the call ends with an
// error matching [ErrBudgetExhausted] (a hedge is simply not sent).
//
// One Budget may be shared by several Transports (one per downstream service
// is typical); it is safe for concurrent use.
type Budget struct {
	// Earnings are kept in thousandths of a retry, so that ten answers at
	// 0.1 earn exactly one retry.
	ratio, maxEarned int64
	floor            *rate.Limiter // nil: no floor
	now              func() time.Time

	mu      sync.Mutex
	earned  int64
	waiting list.List // of *budgetWaiter, oldest first
	stats   BudgetStats
}

// milli is one retry in the Budget's fixed-point accounting.
const milli = 1000

// BudgetStats counts what a Budget saw.
type BudgetStats struct {
	Answered int64 // answered attempts, each earning Ratio retries
	Retries  int64 // retries and hedges given a token
	Waited   int64 // of the Retries, those that waited for their token
	Denied   int64 // retries and hedges given none
}

// NewBudget returns a Budget configured by cfg, with nothing earned yet.
func NewBudget(cfg BudgetConfig) *Budget {
	return newBudget(cfg, time.Now)
}

func newBudget(cfg BudgetConfig, now func() time.Time) *Budget {
	if cfg.Ratio <= 0 {
		cfg.Ratio = defaultBudgetRatio
	}
	if cfg.MaxEarned <= 0 {
		cfg.MaxEarned = defaultBudgetMaxEarned
	}
	if cfg.FloorRate == 0 {
		cfg.FloorRate = defaultBudgetFloorRate
	}
	if cfg.FloorBurst <= 0 {
		cfg.FloorBurst = defaultBudgetFloor
	}
	b := &Budget{
		ratio:     max(1, int64(math.Round(cfg.Ratio*milli))),
		maxEarned: max(milli, int64(math.Round(cfg.MaxEarned*milli))),
		now:       now,
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

// answered records an answered attempt, which earns Ratio retries; the
// retries that wait for a token get what it earned first, oldest first.
func (b *Budget) answered() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.Answered++
	b.earned = min(b.earned+b.ratio, b.maxEarned)
	for b.earned >= milli && b.waiting.Len() > 0 {
		b.earned -= milli
		b.grant(b.waiting.Remove(b.waiting.Front()).(*budgetWaiter))
	}
}

// allowRetry takes one token for a retry or a hedge that does not wait,
// reporting whether there was one.
func (b *Budget) allowRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.take() {
		return true
	}
	b.stats.Denied++
	return false
}

// take takes a token, earned or of the floor, when one is left now.
func (b *Budget) take() bool {
	switch {
	case b.earned >= milli:
		b.earned -= milli
	case b.floor != nil && b.floor.AllowN(b.now(), 1):
	default:
		return false
	}
	b.stats.Retries++
	return true
}

// spend takes a token for a retry that is made whatever the budget holds
// (a critical call's, [WithCritical]): an earned retry or a floor token when
// one is left, so that the budget sees the load, and never a denial.
func (b *Budget) spend() {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.earned >= milli:
		b.earned -= milli
	case b.floor != nil:
		b.floor.AllowN(b.now(), 1)
	}
	b.stats.Retries++
}

// budgetWaiter is a retry waiting for a token.
type budgetWaiter struct {
	ready   chan struct{} // closed when granted
	granted bool
	floor   *rate.Reservation // of the floor, nil for none
	floorAt time.Time         // when floor's token is due
}

// grant gives w an earned token; its floor reservation goes back.
func (b *Budget) grant(w *budgetWaiter) {
	if w.floor != nil {
		w.floor.CancelAt(b.now())
		w.floor = nil
	}
	w.granted = true
	b.stats.Retries++
	b.stats.Waited++
	close(w.ready)
}

// wait takes a token for a retry, waiting for one when there is none (see
// Budget), and returns how long it waited; policy, asked only when there
// is none, says how long it may wait. It returns a *refusal at once when
// the policy is fail-fast, and when ctx ends or the policy's until passes
// first.
func (b *Budget) wait(ctx context.Context, policy func() waitPolicy) (time.Duration, error) {
	b.mu.Lock()
	if b.waiting.Len() == 0 && b.take() {
		b.mu.Unlock()
		return 0, nil
	}
	p := policy()
	start := b.now()
	if p.failFast || !p.until.IsZero() && !start.Before(p.until) {
		b.stats.Denied++
		b.mu.Unlock()
		if p.failFast {
			return 0, &refusal{detail: "the retry budget had no token and the call is fail-fast"}
		}
		return 0, &refusal{detail: fmt.Sprintf("the retry budget had no token and %s has come", p.bound)}
	}
	w := &budgetWaiter{ready: make(chan struct{})}
	e := b.waiting.PushBack(w)
	b.reserveFloor(w, start, p.until)
	next := p.until
	if w.floor != nil {
		next = w.floorAt
	}
	b.mu.Unlock()

	var timerC <-chan time.Time
	if !next.IsZero() {
		timer := p.newTimer(max(next.Sub(start), 0))
		defer timer.Stop()
		timerC = timer.C
	}
	select {
	case <-w.ready:
	case <-timerC:
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	waited := now.Sub(start)
	switch {
	case w.granted:
		return waited, nil
	case w.floor != nil && !now.Before(w.floorAt):
		b.waiting.Remove(e)
		b.stats.Retries++
		b.stats.Waited++
		return waited, nil
	}
	b.waiting.Remove(e)
	if w.floor != nil {
		w.floor.CancelAt(now)
	}
	b.stats.Denied++
	r := &refusal{detail: fmt.Sprintf("the retry waited %s for a token of the retry budget until %s",
		waited.Round(time.Millisecond), p.bound), cause: ctx.Err()}
	if r.cause != nil {
		r.detail = fmt.Sprintf("the retry waited %s for a token of the retry budget and the context ended first",
			waited.Round(time.Millisecond))
	}
	return waited, r
}

// reserveFloor reserves a floor token for w when the floor can serve it
// before until (zero: any time).
func (b *Budget) reserveFloor(w *budgetWaiter, now, until time.Time) {
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
	w.floor, w.floorAt = r, at
}
