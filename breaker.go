package idem

import (
	"container/list"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sony/gobreaker/v2"
)

// ErrCircuitOpen: the circuit breaker of the request's host did not let
// the attempt through, so nothing was sent: the call was fail-fast
// ([Config.FailFast], [WithFailFast]), or it waited for the host and its
// deadline, its wait bound ([Config.MaxWait]) or its context came first, or
// the host's open period outlasted its deadline, so that it did not wait at
// all. The Error's Detail says which, and its Waited how long it waited.
var ErrCircuitOpen = errors.New("idem: circuit open for this host (a local decision of this client)")

// Defaults of [BreakerConfig], as its fields' docs state them.
const (
	defaultBreakerConsecutiveFailures = 20
	defaultBreakerFailureRatio        = 0.8
	defaultBreakerMinRequests         = 100
	defaultBreakerWindow              = 10 * time.Second
	defaultBreakerOpenTimeout         = 5 * time.Second
	defaultBreakerProbes              = 1
	defaultBreakerMaxHosts            = 1024
)

// firstOpenPeriod is how long a breaker opened without Retry-After stays
// open the first time (or OpenTimeout, when shorter).
const firstOpenPeriod = time.Second

// BreakerConfig configures the per-host circuit breakers (sony/gobreaker)
// of a Transport. Its zero value gives the defaults listed with each field.
//
// A breaker counts attempts, not calls, and its failures are those of the
// outcome table (outcomes.go, docs/CONTRACT.md §8): attempts that were not
// sent or got no complete response (attempt timeouts included), and 500,
// 502, 503 and 504 responses. Not failures: other responses (a 4xx is the
// caller's problem, not the host's; 429 is throttling, not a fault; a 500
// result-unavailable is an answer). An attempt ended by the caller's own
// context, or a hedge's attempt cancelled because another won, is not
// counted at all.
//
// An open breaker sends nothing to its host, and a call that meets it
// waits for the host, unless it is fail-fast ([Config.FailFast],
// [WithFailFast]): as gRPC's wait-for-ready queues an RPC until its channel
// is ready, the call is queued until the host may be tried again, and the
// deadline still applies. The open period is the Retry-After of the failure
// that opened the breaker (clamped to [Config.MaxRetryAfter]): a host that
// says "1 s" is probed after 1 s. Without one, it is 1 s the first time
// and doubles at each reopening, up to OpenTimeout. Then Probes attempts go
// through. A probe goes to the oldest waiting call whose deadline covers
// the probe's bound (or, when none does, to the one with the most time
// left): the oldest of a deep line may have a moment left, and a probe cut
// short by its own caller tells nothing (it is not counted, and the next
// probe goes at once). A probe is bounded by the open period before it,
// between 1 s and OpenTimeout, or by twice the bound of the probe before
// it when that one ran into it (and by [Config.AttemptTimeout] when set):
// past its bound it fails and counts, so a probe that hangs opens the
// breaker again instead of shutting the host out. When the probes succeed
// the breaker closes, and the calls that waited are released in order at
// a pace that the host sets, as TCP's congestion window: as many attempts
// in flight as probes succeeded, one more each time one of them succeeds
// (the number in flight doubles every round trip), half as many when one
// fails (a host saturated again, its queue full) and from then on one more
// per round trip, until every waiting call is through; a host that fails them in a row opens the
// breaker again, which counts them as it counts any attempt. A call whose
// deadline (or wait bound) comes before the end of the open period does
// not wait: it fails at once, as x/time/rate's Wait does when the deadline
// cannot cover the wait; and a waiting call whose deadline comes sooner
// than the host's latest answer after an opening took (a probe's or a
// released call's) leaves the line then, unsent, since its attempt would
// only be cut by its deadline. A call whose deadline passes while it waits
// gets an error that matches both ErrCircuitOpen and
// context.DeadlineExceeded.
type BreakerConfig struct {
	// Disabled turns the breakers off.
	Disabled bool
	// ConsecutiveFailures trips the breaker: that many failures in a row.
	// Zero means 20: a dead host is stopped within a few calls' worth of
	// retries, while a host that fails half of its attempts (a store so
	// slow that half of them time out, which the retry budget rides out)
	// does not trip by chance: 20 in a row then come about once in 2
	// million attempts, 10 in a row once in 2,000.
	ConsecutiveFailures uint32
	// FailureRatio also trips it: this share of failures among at least
	// MinRequests attempts in the last Window. Zero means 0.8: a host that
	// fails four attempts in five is nearly down. Below that the retry
	// budget funds the retries, and since an open breaker makes its calls
	// wait, opening it would only hold back calls that would succeed.
	FailureRatio float64
	// MinRequests is the sample FailureRatio needs. Zero means 100, so
	// that the share is measured, not a run of luck.
	MinRequests uint32
	// Window is the span of the rolling window over which the attempts
	// are counted, in ten steps. Zero means 10 s: recent enough to reflect
	// the host's present state.
	Window time.Duration
	// OpenTimeout bounds the open period of a breaker opened without
	// Retry-After: 1 s (or OpenTimeout when shorter) the first time,
	// doubled at each reopening up to OpenTimeout. Zero means 5 s: a host
	// down for a second is probed after one, one down for minutes is
	// probed every 5 s.
	OpenTimeout time.Duration
	// Probes is how many attempts a breaker lets through once its open
	// period ended (half-open): that many successes in a row close it,
	// and one failure opens it again. Zero means 1: the calls released
	// after it are paced by the host's answers (see above), so one probe
	// that succeeds by luck costs the host little, and a host that fails a
	// share of its attempts is not kept shut by a run of probes it must
	// all pass.
	Probes uint32
	// MaxHosts bounds the breakers kept; the least recently used is dropped
	// beyond it, so a client that talks to many hosts does not grow without
	// limit. Zero means 1024.
	MaxHosts int
}

// BreakerState is the state of a host's circuit breaker, as the [Observer]
// sees it.
type BreakerState int

const (
	// BreakerClosed: attempts go through and are counted.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: Probes attempts go through; the others wait (or
	// fail fast).
	BreakerHalfOpen
	// BreakerOpen: no attempt goes through; calls wait for the end of the
	// open period (or fail fast with [ErrCircuitOpen]).
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return fmt.Sprintf("BreakerState(%d)", int(s))
}

// breakerState returns the [BreakerState] of a gobreaker state.
func breakerState(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	case gobreaker.StateOpen:
		return BreakerOpen
	}
	return BreakerClosed
}

// What an attempt reports to its host's breaker, besides nil for a
// success: a failure, or an attempt that says nothing of the host's health
// (the caller ended it, or no request could be built).
var (
	errAttemptFailed   = errors.New("attempt failed")
	errAttemptExcluded = errors.New("attempt not counted")
)

// breakers is a bounded, least-recently-used registry of per-host breakers.
// It is safe for concurrent use.
type breakers struct {
	cfg           BreakerConfig // resolved
	maxRetryAfter time.Duration // Config.MaxRetryAfter, which clamps an open period
	now           func() time.Time
	onChange      func(host string, from, to BreakerState)

	mu     sync.Mutex
	byHost map[string]*list.Element // of *hostBreaker
	lru    list.List                // most recently used at the front
}

// newBreakers returns the registry of cfg, nil when the breakers are
// disabled. now is the Transport's clock; onChange is told of every state
// change.
func newBreakers(cfg BreakerConfig, maxRetryAfter time.Duration, now func() time.Time,
	onChange func(host string, from, to BreakerState)) *breakers {
	if cfg.Disabled {
		return nil
	}
	orDefault(&cfg.ConsecutiveFailures, defaultBreakerConsecutiveFailures)
	orDefault(&cfg.FailureRatio, defaultBreakerFailureRatio)
	orDefault(&cfg.MinRequests, defaultBreakerMinRequests)
	orDefault(&cfg.Window, defaultBreakerWindow)
	orDefault(&cfg.OpenTimeout, defaultBreakerOpenTimeout)
	orDefault(&cfg.Probes, defaultBreakerProbes)
	orDefault(&cfg.MaxHosts, defaultBreakerMaxHosts)
	return &breakers{cfg: cfg, maxRetryAfter: maxRetryAfter, now: now, onChange: onChange,
		byHost: map[string]*list.Element{}}
}

// host returns the breaker of u's host, creating it when needed; nil when
// the breakers are disabled. The key is built in a buffer on the stack, and
// a hit allocates nothing.
func (r *breakers) host(u *url.URL) *hostBreaker {
	if r == nil {
		return nil
	}
	var buf [64]byte // room for most keys
	return r.lookup(appendHostKey(buf[:0], u))
}

// lookup returns the breaker of the host named by key (see appendHostKey),
// creating it when needed. The map is indexed by the bytes of key, which
// are copied into a string only for a new entry.
func (r *breakers) lookup(key []byte) *hostBreaker {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byHost[string(key)]; ok {
		r.lru.MoveToFront(e)
		return e.Value.(*hostBreaker)
	}
	if r.lru.Len() >= r.cfg.MaxHosts {
		oldest := r.lru.Back()
		r.lru.Remove(oldest)
		delete(r.byHost, oldest.Value.(*hostBreaker).name)
	}
	h := newHostBreaker(r, string(key))
	r.byHost[h.name] = r.lru.PushFront(h)
	return h
}

// len returns how many breakers the registry holds.
func (r *breakers) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len()
}

// settings returns the gobreaker settings of h. gobreaker's own open
// period (Timeout) is a nanosecond: h keeps the open period of each
// opening itself and calls gobreaker only once it has passed.
func (r *breakers) settings(h *hostBreaker) gobreaker.Settings {
	cfg := r.cfg
	return gobreaker.Settings{
		Name:         h.name,
		MaxRequests:  cfg.Probes,
		Interval:     cfg.Window,
		BucketPeriod: cfg.Window / 10,
		Timeout:      time.Nanosecond,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			counted := c.TotalSuccesses + c.TotalFailures
			return c.ConsecutiveFailures >= cfg.ConsecutiveFailures ||
				(counted >= cfg.MinRequests &&
					float64(c.TotalFailures) >= cfg.FailureRatio*float64(counted))
		},
		IsExcluded:    func(err error) bool { return err == errAttemptExcluded },
		OnStateChange: func(_ string, from, to gobreaker.State) { h.changed(from, to) },
	}
}

// breakerReport is what an attempt reports to its host's breaker: nil for
// a success, errAttemptFailed for an outcome the table (outcomes.go) counts
// as a failure of the host, or errAttemptExcluded when the attempt's own
// context ended it (the caller's, or a hedge that lost).
func (res *result) breakerReport(ended bool) error {
	switch {
	case ended:
		return errAttemptExcluded
	case res.rule.failure:
		return errAttemptFailed
	}
	return nil
}

// appendHostKey appends to dst the name of u's breaker: scheme://host:port,
// lower case, with the scheme's default port made explicit.
func appendHostKey(dst []byte, u *url.URL) []byte {
	start := len(dst)
	dst = appendLower(dst, u.Scheme)
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if string(dst[start:]) == "https" {
			port = "443"
		}
	}
	dst = append(dst, "://"...)
	if strings.Contains(host, ":") {
		dst = append(dst, '[')
		dst = appendLower(dst, host)
		dst = append(dst, ']')
	} else {
		dst = appendLower(dst, host)
	}
	dst = append(dst, ':')
	return append(dst, port...)
}

// appendLower appends s in lower case to dst, as strings.ToLower would.
func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return append(dst, strings.ToLower(s)...)
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}
