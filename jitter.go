package idem

import (
	"math"
	"time"
)

// Default backoff bounds: the first retry waits up to 100 ms, and no wait
// exceeds 10 s.
const (
	defaultBackoffBase = 100 * time.Millisecond
	defaultBackoffCap  = 10 * time.Second
)

// Jitter names how a backoff delay is randomised. Randomising spreads the
// retries of many clients that failed together, so that they do not return
// in lockstep; full jitter spreads them most (and is the default).
type Jitter int

const (
	// FullJitter waits random(0, min(cap, base*2^n)).
	FullJitter Jitter = iota
	// EqualJitter waits half of min(cap, base*2^n) plus a random share of
	// the other half: never less than half the exponential bound.
	EqualJitter
	// DecorrelatedJitter waits min(cap, random(base, 3*previous)), growing
	// from the previous wait rather than from the attempt number.
	DecorrelatedJitter
	// NoJitter waits exactly min(cap, base*2^n): plain exponential backoff,
	// for comparison only.
	NoJitter
)

// Backoff describes the wait before each retry. Its zero value is full
// jitter with base 100 ms and cap 10 s. It is a value: safe for concurrent
// use.
type Backoff struct {
	Base   time.Duration // the bound of the first wait; zero or negative means 100 ms
	Cap    time.Duration // the largest wait; zero or negative means 10 s
	Jitter Jitter        // zero means FullJitter
}

// Delay returns the wait before retry n, where n counts the retries already
// made (0 before the first retry), prev is the previous wait (used by
// [DecorrelatedJitter]; 0 before the first retry) and u is a uniform random
// number in [0, 1). It is a pure function of its arguments.
func (b Backoff) Delay(n int, prev time.Duration, u float64) time.Duration {
	base, cap := b.bounds()
	switch b.Jitter {
	case EqualJitter:
		half := exponential(base, cap, n) / 2
		return half + scale(half, u)
	case DecorrelatedJitter:
		if prev < base {
			prev = base
		}
		hi := min(3*prev, cap) // 3*prev cannot overflow: prev <= cap in use
		if hi <= base {
			return min(base, cap)
		}
		return base + scale(hi-base, u)
	case NoJitter:
		return exponential(base, cap, n)
	default:
		return scale(exponential(base, cap, n), u)
	}
}

func (b Backoff) bounds() (base, cap time.Duration) {
	base, cap = b.Base, b.Cap
	if base <= 0 {
		base = defaultBackoffBase
	}
	if cap <= 0 {
		cap = defaultBackoffCap
	}
	return base, cap
}

// exponential returns min(cap, base*2^n) without overflowing.
func exponential(base, cap time.Duration, n int) time.Duration {
	if n < 0 {
		n = 0
	}
	if n >= 62 || base > cap>>n {
		return cap
	}
	return base << n
}

// scale returns d*u for u in [0, 1), clamping u into that range.
func scale(d time.Duration, u float64) time.Duration {
	if !(u > 0) { // also catches NaN
		return 0
	}
	if u >= 1 {
		u = math.Nextafter(1, 0)
	}
	return time.Duration(float64(d) * u)
}
