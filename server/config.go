package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// KeyPolicy says what the middleware does with a request that carries no
// Idempotency-Key. Safe methods (GET, HEAD, OPTIONS, TRACE) always pass
// straight through, and PUT and DELETE, idempotent by RFC 9110, use a key
// only when one is present.
type KeyPolicy int

const (
	// KeyRequired answers a POST, PATCH or other non-idempotent request that
	// has no key with 400 key-missing. It is the zero value.
	KeyRequired KeyPolicy = iota
	// KeyOptional passes a request without a key straight to the handler and
	// protects the requests that carry one.
	KeyOptional
)

// Mode says how an operation's effects and its stored response become
// durable together.
type Mode int

const (
	// Transactional is the zero [Mode]. With a [PostgresStore] the claim, the
	// handler's mutations (made through [Tx](ctx)) and the stored response
	// are one database transaction: a crash before commit leaves nothing. A
	// duplicate waits for the open transaction up to [Config.WaitBound]. With a
	// [MemoryStore] the claim is held in memory and there is no transaction.
	Transactional Mode = iota
	// Leased is for handlers whose effects leave the database (a call to a
	// payment gateway): the claim commits on its own with a lease and a
	// fencing token, the handler reaches them through [LeaseFrom](ctx), and
	// a duplicate that finds a live lease gets 409 at once.
	Leased
)

// Defaults of [Config], as its fields' docs state them.
const (
	defaultRetention        = 24 * time.Hour
	defaultLease            = 30 * time.Second
	defaultWaitBound        = 2 * time.Second
	defaultMaxRequestBytes  = 1 << 20
	defaultMaxResponseBytes = 1 << 20
)

// defaultRejectStatuses are the statuses that refuse the request itself:
// they roll back and store nothing (docs/CONTRACT.md §4).
var defaultRejectStatuses = []int{400, 401, 403, 404, 405, 406, 413, 415, 422, 429}

// baseReplayHeaders are always replayed when the handler set them.
var baseReplayHeaders = []string{"Content-Type", "Content-Language", "Location", "ETag", "Last-Modified", "Cache-Control"}

// neverReplayed are never stored or replayed, whatever ReplayHeaders says.
var neverReplayed = []string{
	"Set-Cookie", "Www-Authenticate", "Authorization", "Proxy-Authenticate", "Proxy-Authorization",
	"Date", "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Te", "Trailer",
	"Upgrade", "Content-Length", wire.HeaderReplayed,
}

// Config configures [Middleware]. Its zero value is ready to use: keys
// required, transactional mode, one scope for every caller, 24 h retention,
// 30 s leases, a 2 s wait for a concurrent duplicate, 1 MiB caps on request
// and response bodies and the contract's header allowlist and rejection
// statuses.
type Config struct {
	// Keys is the [KeyPolicy]: what a request without a key gets. Zero:
	// [KeyRequired].
	Keys KeyPolicy

	// Mode is how the operation's effects and its stored response become
	// durable together (see [Mode]): [Transactional] (zero) or [Leased].
	Mode Mode

	// Scope gives the tenant and principal a request is made for, from the
	// application's authentication (never from the body or the key). The
	// same key under another scope is another record. Nil: every request
	// shares the scope ("", ""), right only for single-caller services.
	Scope func(r *http.Request) (tenant, principal string)

	// Route names the operation a request is for. Nil: the method plus the
	// ServeMux pattern that routed it, "POST /v1/payments/{id}" (mount the
	// middleware per handler, mux.Handle("POST /v1/payments", mw(h)), so
	// that r.Pattern is set), or the method plus the request path when no
	// pattern is set, which the middleware logs once as a warning and
	// marks in [Event.RouteIsPath]: then /v1/accounts/1 and /v1/accounts/2
	// are two routes. Go's ServeMux and
	// chi (v5.2 and later) set r.Pattern and the path values; behind
	// another router, give the pattern it matched:
	//
	//	chi < v5.2:  func(r *http.Request) string { return r.Method + " " + chi.RouteContext(r.Context()).RoutePattern() }
	//	gorilla/mux: func(r *http.Request) string { t, _ := mux.CurrentRoute(r).GetPathTemplate(); return r.Method + " " + t }
	//
	// (mount the middleware on the route, after routing: chi's r.With(mw),
	// gorilla's route.Handler(mw(h))). Gin and echo keep the pattern in
	// their own context: use their middleware (the modules ginidem,
	// echoidem and echo5idem, over [Adapter]), not this one. A Route
	// that returns "" lets the request bypass the middleware. Under a
	// catch-all pattern ("POST /v1/accounts/") the request's path is part of
	// its fingerprint, so a key used on /v1/accounts/1 gets 422 key-reused
	// on /v1/accounts/2.
	Route func(r *http.Request) string

	// Retention is how long a record answers retries. A retry after it runs
	// the handler again. In [Leased] mode it must be at least twice the
	// Lease ([Middleware] panics otherwise), so that a retry after a lease
	// ended finds the record and its recovery point; a record whose lease
	// is live is never treated as expired, and a takeover makes the record
	// answer for a full Retention from then. Zero or negative: 24 h.
	Retention time.Duration

	// Lease is the length of a Leased-mode claim, judged by the database
	// clock; the handler may extend it. Zero or negative: 30 s.
	Lease time.Duration

	// WaitBound is how long a duplicate of a [Transactional] request that is
	// still running waits for it before it gets 409 key-in-flight. With a
	// [PostgresStore] each waiting duplicate holds a pool connection and an
	// open transaction while it waits, so size the pool for the duplicates
	// too. In both modes the bound also covers the wait for a pool
	// connection (the two waits share it): a request that gets none within
	// it gets 409 key-in-flight when a Transactional attempt of its key runs
	// on this store, else 503 store-unavailable (Retry-After 1), and holds
	// nothing while it waits.
	// Zero: 2 s; negative: no wait for a running duplicate (a
	// wait for a pool connection is then bounded only by the request's
	// context).
	WaitBound time.Duration

	// MaxRequestBytes caps the request body, which the middleware reads to
	// fingerprint it; a larger body gets 413. Zero or negative: 1 MiB.
	MaxRequestBytes int64

	// MaxResponseBytes caps a stored response body. A response that outgrows
	// it is committed as it stands, marked result-unavailable, and streamed
	// to the client; a retry then gets 500 result-unavailable and the
	// handler never runs again (a 5xx or a rejection status rolls back
	// instead, and a retry runs afresh). Zero or negative: 1 MiB.
	MaxResponseBytes int

	// ReplayHeaders are response headers replayed besides Content-Type,
	// Content-Language, Location, ETag, Last-Modified and Cache-Control.
	// Set-Cookie, authentication, Date and connection-level headers are
	// never stored, whatever this says.
	ReplayHeaders []string

	// RejectStatuses are the statuses by which a handler refuses the
	// request itself: they roll back and store nothing, so that a corrected
	// retry with the same key is processed. Nil: 400, 401, 403, 404, 405,
	// 406, 413, 415, 422 and 429; an empty, non-nil slice: none.
	RejectStatuses []int

	// FingerprintHeaders are request headers added to the fingerprint, for
	// APIs whose operation depends on one (an API version header, say).
	FingerprintHeaders []string

	// ProblemPrefix is prepended to problem names to form the type URI of
	// the problem documents the middleware writes. Empty:
	// wire.DefaultProblemPrefix ("urn:idem:problem:").
	ProblemPrefix string

	// Logger receives a record for every claim, replay, refusal, takeover,
	// release and stale completion. Nil: slog.Default().
	Logger *slog.Logger

	// Hooks observe the steps of every keyed request. The zero Hooks does
	// nothing.
	Hooks Hooks

	// KeyHeader names the request header that carries the idempotency key,
	// for APIs that use another than the draft's (X-Idempotency-Key,
	// PayPal-Request-Id); clients must send the same name (idem's
	// Config.KeyHeader). [Middleware] panics on a name that is not a valid
	// header field name. Empty: "Idempotency-Key".
	KeyHeader string

	// AuthorizeReplay, when set, is asked before a stored response is
	// replayed, with the retry's request and the operation it names, and
	// must return nil only when the caller may still receive it: a non-nil
	// error answers 403 replay-forbidden and sends nothing stored, so that a
	// caller whose rights were revoked since the first request learns
	// nothing of its result (docs/CONTRACT.md §4). It runs on the request's
	// goroutine, must be safe for concurrent use, and should be quick. Nil:
	// every retry that reaches the middleware (past the service's own
	// authentication) gets the replay.
	AuthorizeReplay func(r *http.Request, op Operation) error
	// DeadlineHeader, when set, names a request header that carries the
	// time the client has left, in whole milliseconds (idem's
	// Config.DeadlineHeader sends it): a keyed request that says 0 or
	// less, whose client gave up before it arrived, is answered 504
	// deadline-expired before its key is claimed, so that nothing runs
	// and a later retry with the key is processed. A value that is not a
	// whole number is ignored. [Middleware] panics on a name that is not
	// a valid header field name. Empty: no such header is read.
	DeadlineHeader string
}

// settings is a [Config] with its defaults resolved once, by [Middleware].
type settings struct {
	Config
	replay         map[string]bool
	never          map[string]bool
	reject         map[int]bool
	fpHeaders      []string
	noPattern      sync.Once // the first request routed without a pattern is logged
	keyHeader      string    // KeyHeader, canonical
	deadlineHeader string    // DeadlineHeader, canonical; "" for none
}

func newSettings(cfg Config) *settings {
	s := &settings{Config: cfg}
	s.Retention = orDefault(s.Retention, defaultRetention)
	s.Lease = orDefault(s.Lease, defaultLease)
	if s.WaitBound == 0 { // negative means no wait
		s.WaitBound = defaultWaitBound
	}
	if s.Mode == Leased && s.Retention < 2*s.Lease {
		panic(fmt.Sprintf("server: Config.Retention (%s) must be at least twice Config.Lease (%s) in Leased mode: "+
			"a retry after a lease ended must still find the record and its recovery point", s.Retention, s.Lease))
	}
	s.keyHeader = wire.HeaderKey
	if s.KeyHeader != "" {
		if !wire.ValidHeaderName(s.KeyHeader) {
			panic(fmt.Sprintf("server: Config.KeyHeader %q is not a valid header field name", s.KeyHeader))
		}
		s.keyHeader = http.CanonicalHeaderKey(s.KeyHeader)
	}
	if s.DeadlineHeader != "" {
		if !wire.ValidHeaderName(s.DeadlineHeader) {
			panic(fmt.Sprintf("server: Config.DeadlineHeader %q is not a valid header field name", s.DeadlineHeader))
		}
		s.deadlineHeader = http.CanonicalHeaderKey(s.DeadlineHeader)
	}
	s.MaxRequestBytes = orDefault(s.MaxRequestBytes, defaultMaxRequestBytes)
	s.MaxResponseBytes = orDefault(s.MaxResponseBytes, defaultMaxResponseBytes)
	if s.ProblemPrefix == "" {
		s.ProblemPrefix = wire.DefaultProblemPrefix
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.RejectStatuses == nil {
		s.RejectStatuses = defaultRejectStatuses
	}
	s.reject = make(map[int]bool, len(s.RejectStatuses))
	for _, code := range s.RejectStatuses {
		s.reject[code] = true
	}
	s.never = headerSet(neverReplayed)
	s.replay = headerSet(append(append([]string(nil), baseReplayHeaders...), s.ReplayHeaders...))
	for name := range s.never {
		delete(s.replay, name)
	}
	for _, name := range s.FingerprintHeaders {
		s.fpHeaders = append(s.fpHeaders, http.CanonicalHeaderKey(name))
	}
	return s
}

// orDefault is v, or def when v is zero or negative.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func headerSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, name := range names {
		set[http.CanonicalHeaderKey(name)] = true
	}
	return set
}

// route names the operation r is for; "" means bypass.
func (s *settings) route(r *http.Request) string {
	if s.Route != nil {
		return s.Route(r)
	}
	if s.routeIsPath(r) {
		s.noPattern.Do(func() { s.warnNoPattern(r) })
		return r.Method + " " + r.URL.EscapedPath()
	}
	p := r.Pattern
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		p = strings.TrimLeft(p[i:], " \t") // drop the pattern's own method
	}
	return r.Method + " " + p
}

// routeIsPath reports whether route(r) is r's method and raw path, for
// want of a pattern ([Event.RouteIsPath]).
func (s *settings) routeIsPath(r *http.Request) bool { return s.Route == nil && r.Pattern == "" }

// warnNoPattern says, once, that requests are keyed by their raw path.
func (s *settings) warnNoPattern(r *http.Request) {
	s.Logger.LogAttrs(r.Context(), slog.LevelWarn,
		"idem: the request has no route pattern (r.Pattern is empty: not Go's ServeMux, or the middleware is mounted before it routes); "+
			"keying records by method and raw path, so each path is a route of its own: set Config.Route to the router's pattern",
		slog.String("method", r.Method), slog.String("path", r.URL.EscapedPath()))
}

func (s *settings) scope(r *http.Request) (tenant, principal string) {
	if s.Scope == nil {
		return "", ""
	}
	return s.Scope(r)
}

// waitBound is the resolved wait for a running duplicate; 0 means none.
func (s *settings) waitBound() time.Duration {
	return max(s.WaitBound, 0)
}

// outcome classifies the status a handler answered with.
type outcome int

const (
	outcomeStore  outcome = iota // the operation's own outcome: commit and store
	outcomeReject                // a refusal of the request: roll back, store nothing
	outcomeFail                  // a 5xx: roll back (transactional) or end the lease
)

func (s *settings) outcome(status int) outcome {
	switch {
	case status >= 500:
		return outcomeFail
	case s.reject[status]:
		return outcomeReject
	default:
		return outcomeStore
	}
}

// expired reports whether r's DeadlineHeader says that its client has no
// time left.
func (s *settings) expired(r *http.Request) bool {
	if s.deadlineHeader == "" {
		return false
	}
	v := r.Header[s.deadlineHeader]
	if len(v) == 0 {
		return false
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
	return err == nil && ms <= 0
}
