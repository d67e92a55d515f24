package idem

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// DefaultMaxAttempts is the bound of [Config.MaxAttempts] when it is zero:
// the most requests one call puts on the wire, the first included.
const DefaultMaxAttempts = 6

// Defaults of the other fields of [Config], as their docs state them.
const (
	defaultMaxRetryAfter   = 30 * time.Second
	defaultMaxWait         = 30 * time.Second
	defaultMaxBufferedBody = 1 << 20
)

// Config configures a Transport. Its zero value gives the defaults listed
// with each field. [NewTransport] copies it; changing it afterwards has no
// effect.
type Config struct {
	// Base sends each attempt. Nil means a clone of http.DefaultTransport,
	// private to this Transport.
	//
	// A Base that wraps an *http.Transport (tracing, metrics, auth) must
	// call it with the request's context or one derived from it, as
	// req.Clone(ctx) and req.WithContext(ctx) with ctx from req.Context()
	// do, and must not return before it returned: idem learns whether an
	// attempt was sent from the connections net/http reports through the
	// context's httptrace.ClientTrace (the context also carries the call's
	// deadline and AttemptTimeout). A Base must not re-send a request by
	// itself. A Base of another kind may report its connections through
	// the trace's GetConn and GotConn hooks.
	//
	// A Base that runs the request under a context of its own hides the
	// trace. Its errors are then ambiguous, so a POST without a key is
	// never re-sent after one and fails with [ErrOutcomeUnknown], unless the
	// error's type shows a failure before sending (a dial or DNS error, a
	// proxy's CONNECT, a TLS certificate rejected or a peer that does not
	// speak TLS) that net/http could not have followed with a re-send of
	// its own (it re-sends GET, HEAD, OPTIONS, TRACE and keyed requests
	// after a reused connection broke). Its re-sends go uncounted.
	Base http.RoundTripper

	// MaxAttempts bounds the requests one call puts on the wire, the first
	// included; 1 disables retries. Zero or negative means 6: enough that a
	// brownout failing 40% of attempts fails fewer than 1% of calls
	// (0.4^5 would fail 1.02%), while the budget, not MaxAttempts, bounds
	// what retries add to a service that is down.
	MaxAttempts int

	// Backoff sets the wait before a retry that has no Retry-After. The zero
	// value is full jitter, base 100 ms, cap 10 s.
	Backoff Backoff

	// AttemptTimeout bounds each attempt, from sending the request until
	// the response body is read or closed. Zero or negative means no bound
	// other than the caller's context. An attempt that times out is
	// ambiguous and retried when that is safe.
	AttemptTimeout time.Duration

	// MaxRetryAfter clamps the wait a server asks for with Retry-After.
	// Zero or negative means 30 s.
	MaxRetryAfter time.Duration

	// SFStringKeys sends generated and [WithKey] keys as RFC 8941 sf-strings
	// ("..."), the form of the IETF draft, instead of bare tokens, the form
	// most deployed APIs expect. False means bare tokens.
	SFStringKeys bool

	// MaxBufferedBody is how much of a response body is read into memory
	// before the response is returned, for requests that may be retried, so
	// that a body cut short by the network is retried instead of surfacing
	// as a read error after RoundTrip returned. A longer body is streamed,
	// and a cut in its remainder is the caller's read error. Zero means
	// 1 MiB; negative means never buffer.
	MaxBufferedBody int64

	// Budget limits retries to a share of first attempts plus a small floor
	// rate (see Budget), so that retries cannot multiply the load on a
	// service that is failing. Share one Budget among the Transports that
	// call one service. Nil means a Budget of this Transport's own with the
	// defaults of [BudgetConfig].
	Budget *Budget

	// NoBudget disables the retry budget: every retry that MaxAttempts
	// allows is made. Budget is then ignored.
	NoBudget bool

	// Breaker configures the per-host circuit breakers. The zero value
	// enables them with the defaults of [BreakerConfig].
	Breaker BreakerConfig

	// FailFast makes every call fail at once on a local refusal: an
	// attempt that its host's breaker does not let through ends the call
	// with [ErrCircuitOpen], a retry that the budget has no token for with
	// [ErrBudgetExhausted]. False means a call waits for them, sending
	// nothing, within its deadline and MaxWait (see [BreakerConfig] and
	// Budget), and fails only when they come first. [WithFailFast] sets it
	// for one call.
	FailFast bool

	// MaxWait bounds how long one call waits, in all, for local refusals
	// to pass (its host's breaker, the retry budget), besides its
	// context's deadline; the waits before retries (backoff, Retry-After)
	// do not count. Zero means 30 s, so that a call without a deadline
	// does not wait for a dead host forever; negative means no bound but
	// the deadline.
	MaxWait time.Duration

	// Logger receives a debug record per retry, an info record per call
	// that gives up, and a warning per breaker state change. Nil means no
	// logging.
	Logger *slog.Logger

	// Observer receives every attempt, retry and give-up. The zero value
	// observes nothing.
	Observer Observer

	// KeyHeader names the request header that carries the idempotency key,
	// for APIs that use another than the draft's (X-Idempotency-Key,
	// PayPal-Request-Id). It must be a valid header field name
	// ([NewTransport] panics otherwise). Empty means KeyHeader,
	// "Idempotency-Key".
	KeyHeader string

	// ConcurrencyLimit bounds the requests in flight to each host by a
	// limit that follows the host's latency (limiter.go; from 20, between
	// 1 and 200), so that the client, not the host's queue, holds the
	// excess of an overload. A call that finds no slot waits for one
	// within its deadline, and fails with [ErrOverloaded] once the host's
	// line is overloaded and it waited 20 ms (or 2 of the host's least
	// RTT when longer), or at once when fail-fast. Hedges take a slot too,
	// without waiting. A 5xx, or a timeout well above the host's least
	// RTT, cuts the limit, once a round trip; a timeout near it (a slow
	// host, not a queue) does not. False means no bound.
	ConcurrencyLimit bool

	// DeadlineHeader, when set, names a request header that carries the
	// time left to the attempt's deadline (its context's, or
	// AttemptTimeout's when earlier), in whole milliseconds, so that the
	// server can give up on work nobody waits for (as gRPC's grpc-timeout
	// does; idem's server refuses a keyed request whose time is up with
	// server.Config.DeadlineHeader). It must be a valid header field name
	// ([NewTransport] panics otherwise). Empty means no such header: the
	// name is the API's to choose.
	DeadlineHeader string

	// Classifier, when set, is asked about each attempt before the default
	// rules (see Classifier): it teaches the client an API's own way of
	// saying "retry", "in flight" or "stop". Nil means the default rules
	// alone. [WithClassifier] sets one per call, asked first.
	Classifier Classifier

	// BufferRequestBody, when positive, lets a request body without GetBody
	// (a plain io.Reader) be re-sent: before the first attempt up to
	// BufferRequestBody bytes of it are read into memory. A longer body is
	// sent once, streamed, and the call fails with [ErrNotRewindable], saying
	// so, when it would need a retry after it was read. Zero or negative
	// means no buffering: such a body is re-sent only when no attempt read
	// from it. Do not set it for a body whose writer waits for the response
	// (a pipe that streams a conversation): reading it first would block.
	BufferRequestBody int64

	// Hedge enables hedged requests: a second attempt sent while the first
	// is still running, the first complete response winning. The zero
	// value disables hedging.
	Hedge HedgeConfig
}

// Transport is an http.RoundTripper that makes retries safe: it gives each
// call one idempotency key (in the Idempotency-Key header, or the one
// [Config.KeyHeader] names), sends it on every attempt, and retries only what
// the key or the method makes safe, with backoff, inside the deadline of the
// request's context. It never modifies the caller's request, always closes
// the request body, and returns (resp, nil) when it returns a response,
// whatever its status. It is safe for concurrent use.
//
// Transport departs from http.RoundTripper's contract in one way: some
// responses that it received become errors, because returning them would
// mislead the caller about the operation. They are drained, closed, and
// replaced by an *Error:
//
//   - when the attempts run out on a response that asked for a retry,
//     after an earlier attempt that may have acted (a 5xx, a lost
//     response), or on a 409 key-in-flight: the last response, often a 503
//     from a proxy, says nothing of whether the operation took effect, so
//     the call fails with ErrAttemptsExhausted or ErrKeyInFlight, matching
//     ErrOutcomeUnknown;
//   - when a response asked for a retry that the budget or the deadline
//     does not allow: ErrBudgetExhausted or ErrDeadline, which say why the
//     refusal was not retried (and match ErrOutcomeUnknown when an attempt
//     may have acted);
//   - a response that names a contract problem (422 key-reused, 400
//     key-missing or key-invalid, 500 result-unavailable): ErrKeyReused,
//     ErrKeyMissing, ErrKeyInvalid or ErrResultUnavailable, the last
//     matching ErrOutcomeUnknown too, since the operation took effect;
//   - a response that a Classifier answered with Fail.
//
// The stack, from the caller down: key attachment; the retry loop, which
// asks the budget before each retry or hedge; the host's circuit breaker,
// around each attempt; the base transport.
type Transport struct {
	cfg            Config
	log            *slog.Logger
	keyHeader      string           // Config.KeyHeader, canonical
	deadlineHeader string           // Config.DeadlineHeader, canonical; "" for none
	budget         *Budget          // nil: no budget
	breakers       *breakers        // nil: no breakers
	pacers         perHost[pacer]   // of the hosts that announced a quota (pacer.go)
	limiters       perHost[limiter] // the concurrency limit of each host (limiter.go)
	hedge          *hedger          // nil: no hedging
	// tracedBase: Base is an *http.Transport, which reports every
	// connection through the request's trace.
	tracedBase bool

	// Injected for tests; the real clock, timer and random source otherwise.
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error
	newTimer func(d time.Duration) *time.Timer
	rand     func() float64
	newKey   func() string
}

// NewTransport returns a Transport configured by cfg.
func NewTransport(cfg Config) *Transport {
	if cfg.Base == nil {
		cfg.Base = http.DefaultTransport.(*http.Transport).Clone()
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = defaultMaxRetryAfter
	}
	if cfg.MaxBufferedBody == 0 {
		cfg.MaxBufferedBody = defaultMaxBufferedBody
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = defaultMaxWait
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Transport{
		cfg:      cfg,
		log:      log,
		budget:   cfg.Budget,
		now:      time.Now,
		sleep:    sleep,
		newTimer: time.NewTimer,
		rand:     rand.Float64,
		newKey:   NewKey,
	}
	switch {
	case cfg.NoBudget:
		t.budget = nil
	case t.budget == nil:
		t.budget = NewBudget(BudgetConfig{})
	}
	_, t.tracedBase = cfg.Base.(*http.Transport)
	t.breakers = newBreakers(cfg.Breaker, cfg.MaxRetryAfter, func() time.Time { return t.now() }, t.breakerChanged)
	t.hedge = newHedger(cfg.Hedge, cfg.Breaker.MaxHosts)
	t.keyHeader = keyHeaderName(cfg.KeyHeader)
	t.deadlineHeader = deadlineHeaderName(cfg.DeadlineHeader)
	return t
}

// keyHeaderName returns the canonical form of [Config.KeyHeader], KeyHeader
// when it is empty. It panics on a name that is not a header field name.
func keyHeaderName(name string) string {
	if name == "" {
		return KeyHeader
	}
	if !wire.ValidHeaderName(name) {
		panic(fmt.Sprintf("idem: Config.KeyHeader %q is not a valid header field name", name))
	}
	return http.CanonicalHeaderKey(name)
}

// breakerChanged reports a state change of a host's breaker.
func (t *Transport) breakerChanged(host string, from, to BreakerState) {
	t.log.Warn("idem: circuit breaker changed state",
		slog.String("host", host), slog.String("from", from.String()), slog.String("to", to.String()))
	if t.cfg.Observer.OnBreakerChange != nil {
		t.cfg.Observer.OnBreakerChange(host, from, to)
	}
}

// NewClient returns an http.Client whose Transport is NewTransport(cfg). It
// sets no Client.Timeout: bound each call with its request's context, which
// also bounds the retries.
func NewClient(cfg Config) *http.Client {
	return &http.Client{Transport: NewTransport(cfg)}
}

// RoundTrip sends req, retrying as [Config] and the request allow. It returns
// (resp, nil) when a response is to be returned, and otherwise an *Error
// whose Reason and Err say why (see the Err... sentinels).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c, err := t.newCall(req)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	return c.run()
}

// CloseIdleConnections closes the idle connections of the base transport,
// when it has that method. http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	if ci, ok := t.cfg.Base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// sleep waits for d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
