package idem

import (
	"errors"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrBudgetExhausted: the retry budget had no token for a retry, so the call
// ended with an *Error that describes its last attempt (status, certainty)
// instead of adding load to a service that is failing. It is a local
// decision of this client, not an error from the server.
var ErrBudgetExhausted = errors.New("idem: retry budget exhausted (a local decision of this client, not a server error)")

// Defaults of BudgetConfig.
const (
	DefaultBudgetRatio     = 0.1
	DefaultBudgetMaxEarned = 100
	DefaultBudgetFloorRate = 10
	DefaultBudgetFloor     = 10
)

// BudgetConfig configures a Budget. Its zero value gives the defaults listed
// with each field.
type BudgetConfig struct {
	// Ratio is the share of a retry that each first attempt earns: 0.1 lets
	// retries add at most 10% to the load, the figure of Google's SRE
	// guidance (gRPC's retry throttling and the AWS SDKs use the same idea).
	// It counts in thousandths. Zero or negative means 0.1.
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

// Budget is a token bucket of retries. Every first attempt earns Ratio of a
// retry (up to MaxEarned saved); every retry spends one earned retry or, when
// none is left, one from a floor rate limiter (FloorRate per second, bursts
// of FloorBurst). Over any window of length T, retries are therefore at most
// Ratio x first attempts + MaxEarned saved before it + FloorBurst +
// FloorRate x T. A retry that finds neither is denied, and its call ends with
// an error matching ErrBudgetExhausted.
//
// One Budget may be shared by several Transports (one per downstream service
// is typical); it is safe for concurrent use.
type Budget struct {
	// Earnings are kept in thousandths of a retry, so that ten first
	// attempts at 0.1 earn exactly one retry.
	ratio, maxEarned int64
	floor            *rate.Limiter // nil: no floor
	now              func() time.Time

	mu     sync.Mutex
	earned int64
	stats  BudgetStats
}

// milli is one retry in the Budget's fixed-point accounting.
const milli = 1000

// BudgetStats counts what a Budget saw.
type BudgetStats struct {
	FirstAttempts int64 // first attempts, each earning Ratio of a retry
	Retries       int64 // retries allowed
	Denied        int64 // retries denied
}

// NewBudget returns a Budget configured by cfg, with nothing earned yet.
func NewBudget(cfg BudgetConfig) *Budget {
	return newBudget(cfg, time.Now)
}

func newBudget(cfg BudgetConfig, now func() time.Time) *Budget {
	if cfg.Ratio <= 0 {
		cfg.Ratio = DefaultBudgetRatio
	}
	if cfg.MaxEarned <= 0 {
		cfg.MaxEarned = DefaultBudgetMaxEarned
	}
	if cfg.FloorRate == 0 {
		cfg.FloorRate = DefaultBudgetFloorRate
	}
	if cfg.FloorBurst <= 0 {
		cfg.FloorBurst = DefaultBudgetFloor
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

// firstAttempt records a first attempt, which earns Ratio of a retry.
func (b *Budget) firstAttempt() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.FirstAttempts++
	b.earned = min(b.earned+b.ratio, b.maxEarned)
}

// allowRetry takes one token for a retry, reporting whether there was one.
func (b *Budget) allowRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.earned >= milli:
		b.earned -= milli
	case b.floor != nil && b.floor.AllowN(b.now(), 1):
	default:
		b.stats.Denied++
		return false
	}
	b.stats.Retries++
	return true
}

// spend takes a token for a retry that is made whatever the budget holds
// (a critical call's, WithCritical): an earned retry or a floor token when
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
