package otelidem

import (
	"net/url"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/idemkit/idem/server"
)

// idem's own attribute keys (docs/telemetry.md's table lists where each
// appears). OpenTelemetry's semantic conventions name the others.
const (
	keyCertainty      = attribute.Key("idem.certainty")
	keyProblem        = attribute.Key("idem.problem")
	keyHedge          = attribute.Key("idem.hedge")
	keyKeyPresent     = attribute.Key("idem.key.present")
	keyRetryReason    = attribute.Key("idem.retry.reason")
	keyRetryWait      = attribute.Key("idem.retry.wait")
	keyWire           = attribute.Key("idem.attempt.wire")
	keyOutcomeUnknown = attribute.Key("idem.outcome_unknown")
	keyBreakerState   = attribute.Key("idem.breaker.state")
	keyBreakerPrev    = attribute.Key("idem.breaker.previous_state")
	keyVerdict        = attribute.Key("idem.verdict")
	keyMode           = attribute.Key("idem.mode")
	keyWaited         = attribute.Key("idem.claim.waited")
	keyTakeoverBy     = attribute.Key("idem.takeover.by")
	keyAnswer         = attribute.Key("idem.reconcile.answer")
	keyDelivery       = attribute.Key("idem.delivery.outcome")
	keyParkReason     = attribute.Key("idem.park.reason")
	keyMessageName    = attribute.Key("idem.message.name")
	keyTombstoneBy    = attribute.Key("idem.tombstone.source")
)

// maxCached bounds each cache of attribute sets: past it, sets are built
// for each measurement instead (a client calling thousands of hosts).
const maxCached = 4096

// sets caches the measurement option of each combination of attribute
// values, so that a measurement allocates no attribute set. It is safe
// for concurrent use.
type sets[K comparable] struct {
	mu sync.RWMutex
	m  map[K]metric.MeasurementOption
}

// get returns k's option, built by build on first use.
func (s *sets[K]) get(k K, build func(K) []attribute.KeyValue) metric.MeasurementOption {
	s.mu.RLock()
	opt, ok := s.m[k]
	s.mu.RUnlock()
	if ok {
		return opt
	}
	opt = metric.WithAttributeSet(attribute.NewSet(build(k)...))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[K]metric.MeasurementOption)
	}
	if len(s.m) < maxCached {
		s.m[k] = opt
	}
	return opt
}

// endpoint is the host a request goes to, as the semantic conventions'
// server.address and server.port (the scheme's default port when the URL
// names none).
type endpoint struct {
	host string
	port int
}

func endpointOf(u *url.URL) endpoint {
	if u == nil {
		return endpoint{}
	}
	e := endpoint{host: u.Hostname()}
	if p := u.Port(); p != "" {
		e.port, _ = strconv.Atoi(p)
	} else if u.Scheme == "https" {
		e.port = 443
	} else {
		e.port = 80
	}
	return e
}

func (e endpoint) attrs(kv []attribute.KeyValue) []attribute.KeyValue {
	return append(kv, semconv.ServerAddress(e.host), semconv.ServerPort(e.port))
}

// method returns a request method as http.request.method has it: one of
// the methods that RFC 9110 and RFC 5789 define, or "_OTHER", so that
// invented methods cannot add series.
func method(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH":
		return m
	case "":
		return "GET"
	}
	return "_OTHER"
}

// contractProblems are the problem names of idem's wire contract and of
// package server's middleware: the only ones an attribute carries, since
// another API's problem names are unbounded.
var contractProblems = map[string]bool{
	"key-in-flight": true, "key-reused": true, "key-missing": true, "key-invalid": true,
	"result-unavailable": true, "request-too-large": true, "request-unreadable": true,
	"store-unavailable": true, "commit-failed": true,
}

// problemName returns p when it is a contract problem, "" otherwise.
func problemName(p string) string {
	if contractProblems[p] {
		return p
	}
	return ""
}

// routeParts are a route's attributes: the method and the pattern, for
// http.request.method and http.route; either may be empty.
type routeParts struct {
	method, pattern string
}

// routeOf returns the route of e: a route that is the request's raw path
// (e.RouteIsPath) keeps its method alone, since a path is no template and
// would make a series per id.
func routeOf(e server.Event) routeParts {
	m, pattern := splitRoute(e.Route)
	if e.RouteIsPath {
		pattern = ""
	}
	return routeParts{m, pattern}
}

// splitRoute splits a route as package server names it ("POST
// /v1/payments/{id}") into the method, as http.request.method has it (an
// invented one is _OTHER: a pattern without a method takes any), and the
// pattern. A route that is no method, a space and a pattern with a "/",
// such as a name that Config.Route gave ("charge", "create payment"), is
// all pattern.
func splitRoute(r string) (m, pattern string) {
	first, rest, ok := strings.Cut(r, " ")
	rest = strings.TrimLeft(rest, " ")
	m = method(first)
	if ok && first != "" && (m == first || strings.Contains(rest, "/") && !strings.Contains(first, "/")) {
		return m, rest
	}
	return "", r
}
