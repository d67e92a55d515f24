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

// ErrCircuitOpen: the circuit breaker of the request's host is open (or
// half-open with its probes taken), so the attempt failed fast without
// being sent.
var ErrCircuitOpen = errors.New("idem: circuit open for this host (a local decision of this client)")

// Defaults of BreakerConfig.
const (
	DefaultBreakerConsecutiveFailures = 10
	DefaultBreakerFailureRatio        = 0.5
	DefaultBreakerMinRequests         = 20
	DefaultBreakerWindow              = 10 * time.Second
	DefaultBreakerOpenTimeout         = 5 * time.Second
	DefaultBreakerProbes              = 3
	DefaultBreakerMaxHosts            = 1024
)

// BreakerConfig configures the per-host circuit breakers (sony/gobreaker)
// of a Transport. Its zero value gives the defaults listed with each field.
//
// A breaker counts attempts, not calls, and its failures are those of the
// outcome table (classify.go, docs/CONTRACT.md §8): attempts that were not
// sent or got no complete response (attempt timeouts included), and 500,
// 502, 503 and 504 responses. Not failures: other responses (a 4xx is the
// caller's problem, not the host's; 429 is throttling, not a fault; a 500
// result-unavailable is an answer). An attempt ended by the caller's own
// context, or a hedge's attempt cancelled because another won, is not
// counted at all.
type BreakerConfig struct {
	// Disabled turns the breakers off.
	Disabled bool
	// ConsecutiveFailures trips the breaker: that many failures in a row.
	// Zero means 10: a dead host is stopped within a few calls' worth of
	// retries, while a busy client of a host that fails one attempt in
	// eight (10 in a row: about 1 in 10^9) does not trip by chance, as it
	// would with 5 (about 1 in 30,000 attempts).
	ConsecutiveFailures uint32
	// FailureRatio also trips it: this share of failures among at least
	// MinRequests attempts in the current Window. Zero means 0.5: a host
	// failing every other attempt costs its callers more than it serves.
	FailureRatio float64
	// MinRequests is the sample FailureRatio needs. Zero means 20, so that
	// a handful of attempts cannot trip the breaker by ratio.
	MinRequests uint32
	// Window is the closed-state period after which the counts restart.
	// Zero means 10 s: recent enough to reflect the host's present state.
	Window time.Duration
	// OpenTimeout is how long an open breaker fails fast before it lets
	// probes through (half-open). Zero means 5 s: long enough to shed load
	// from a host that is down, short enough to notice its recovery soon.
	OpenTimeout time.Duration
	// Probes is how many attempts a half-open breaker lets through; that
	// many successes in a row close it, one failure opens it again. Zero
	// means 3, so that one lucky probe does not close it.
	Probes uint32
	// MaxHosts bounds the breakers kept; the least recently used is dropped
	// beyond it, so a client that talks to many hosts does not grow without
	// limit. Zero means 1024.
	MaxHosts int
}

// BreakerState is the state of a host's circuit breaker, as the Observer
// sees it.
type BreakerState int

const (
	// BreakerClosed: attempts go through and are counted.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: a few probes go through; the others fail fast.
	BreakerHalfOpen
	// BreakerOpen: every attempt fails fast with ErrCircuitOpen.
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

// breakerState returns the BreakerState of a gobreaker state.
func breakerState(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	case gobreaker.StateOpen:
		return BreakerOpen
	}
	return BreakerClosed
}

// breaker is the gobreaker of one host.
type breaker = gobreaker.CircuitBreaker[struct{}]

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
	cfg      BreakerConfig
	onChange func(host string, from, to BreakerState)

	mu     sync.Mutex
	byHost map[string]*list.Element // of *hostBreaker
	lru    list.List                // most recently used at the front
}

type hostBreaker struct {
	host string
	cb   *breaker
}

func newBreakers(cfg BreakerConfig, onChange func(host string, from, to BreakerState)) *breakers {
	if cfg.Disabled {
		return nil
	}
	if cfg.ConsecutiveFailures == 0 {
		cfg.ConsecutiveFailures = DefaultBreakerConsecutiveFailures
	}
	if cfg.FailureRatio <= 0 {
		cfg.FailureRatio = DefaultBreakerFailureRatio
	}
	if cfg.MinRequests == 0 {
		cfg.MinRequests = DefaultBreakerMinRequests
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultBreakerWindow
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = DefaultBreakerOpenTimeout
	}
	if cfg.Probes == 0 {
		cfg.Probes = DefaultBreakerProbes
	}
	if cfg.MaxHosts <= 0 {
		cfg.MaxHosts = DefaultBreakerMaxHosts
	}
	return &breakers{cfg: cfg, onChange: onChange, byHost: map[string]*list.Element{}}
}

// lookup returns the breaker of the host named by key (see appendHostKey),
// creating it when needed. A hit allocates nothing: the map is indexed by the
// bytes of key, which are copied into a string only for a new entry.
func (r *breakers) lookup(key []byte) *breaker {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byHost[string(key)]; ok {
		r.lru.MoveToFront(e)
		return e.Value.(*hostBreaker).cb
	}
	if r.lru.Len() >= r.cfg.MaxHosts {
		oldest := r.lru.Back()
		r.lru.Remove(oldest)
		delete(r.byHost, oldest.Value.(*hostBreaker).host)
	}
	host := string(key)
	hb := &hostBreaker{host: host, cb: gobreaker.NewCircuitBreaker[struct{}](r.settings(host))}
	r.byHost[host] = r.lru.PushFront(hb)
	return hb.cb
}

// through runs send, an attempt to u's host, through that host's breaker.
// send returns what the breaker is told of the attempt: nil for a success,
// errAttemptFailed, or errAttemptExcluded. When the breaker refuses the
// attempt, send is not run and through returns the breaker's error. A panic
// in send counts as a failure and goes on (gobreaker's Execute). A nil
// registry (breakers disabled) runs every send.
//
// Execute, unlike the TwoStep breaker's Allow, allocates no closure per
// attempt, and the key is built in a buffer on the stack.
func (r *breakers) through(u *url.URL, send func() error) (refused error) {
	if r == nil {
		send()
		return nil
	}
	var buf [64]byte // room for most keys, so that building one allocates nothing
	ran := false
	_, err := r.lookup(appendHostKey(buf[:0], u)).Execute(func() (struct{}, error) {
		ran = true
		return struct{}{}, send()
	})
	if ran {
		return nil
	}
	return err
}

// len returns how many breakers the registry holds.
func (r *breakers) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len()
}

func (r *breakers) settings(host string) gobreaker.Settings {
	cfg := r.cfg
	return gobreaker.Settings{
		Name:        host,
		MaxRequests: cfg.Probes,
		Interval:    cfg.Window,
		Timeout:     cfg.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			counted := c.TotalSuccesses + c.TotalFailures
			return c.ConsecutiveFailures >= cfg.ConsecutiveFailures ||
				(counted >= cfg.MinRequests &&
					float64(c.TotalFailures) >= cfg.FailureRatio*float64(counted))
		},
		IsExcluded: func(err error) bool { return err == errAttemptExcluded },
		OnStateChange: func(name string, from, to gobreaker.State) {
			if r.onChange != nil {
				r.onChange(name, breakerState(from), breakerState(to))
			}
		},
	}
}

// breakerReport is what an attempt reports to its host's breaker: nil for
// a success, errAttemptFailed for an outcome the table (classify.go) counts
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
