package otelidem

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem/server"
)

// The spans a [Server] adds under a request's span.
const (
	ClaimSpan  = "idem.claim"
	CommitSpan = "idem.commit"
)

// The verdicts of keyed requests (idem.verdict).
const (
	VerdictExecuted          = "executed"           // the handler ran and its outcome committed
	VerdictReplayed          = "replayed"           // a stored response was replayed
	VerdictInFlight          = "in_flight"          // 409 key-in-flight
	VerdictKeyReused         = "key_reused"         // 422 key-reused
	VerdictResultUnavailable = "result_unavailable" // 500 result-unavailable
	VerdictRejected          = "rejected"           // a rejection status (400, 401, ...): rolled back, nothing stored
	VerdictRolledBack        = "rolled_back"        // a 5xx or a panic: rolled back, nothing stored
	VerdictCommitFailed      = "commit_failed"      // the outcome did not commit (500 commit-failed)
	VerdictStale             = "stale"              // a Leased completion refused: another attempt took over
	VerdictRefused           = "refused"            // another problem before the handler (idem.problem says which)
)

// Server turns the events of package server (the middleware's Hooks, the
// reconciler's ReconcileHooks, the sweeper's OnSweep) into measurements,
// and adds spans to the request's span. It is safe for concurrent use.
//
// Mount an HTTP server instrumentation (otelhttp.NewHandler) outside the
// middleware: the request's span then gets idem.verdict, and two child
// spans, [ClaimSpan] and [CommitSpan], for the store's steps.
type Server struct {
	tracer trace.Tracer
	meter  metric.Meter

	requests    metric.Int64Counter
	claims      metric.Float64Histogram
	commits     metric.Float64Histogram
	waits       metric.Int64Counter
	takeovers   metric.Int64Counter
	tombstones  metric.Int64Counter
	swept       metric.Int64Counter
	sweeps      metric.Int64Counter
	settlements metric.Int64Counter

	requestSets sets[requestKey]
	stepSets    sets[stepKey]
}

// NewServer returns a [Server] that reports to cfg's providers. It fails
// only when the meter refuses an instrument.
func NewServer(cfg Config) (*Server, error) {
	in := &instruments{m: cfg.meter()}
	s := &Server{
		tracer:      cfg.tracer(),
		meter:       in.m,
		requests:    in.counter("idem.server.requests", "{request}", "Keyed requests, by verdict."),
		claims:      in.seconds("idem.server.claim.duration", "Time to claim a key, waits for a running duplicate and for a pool connection included.", storeBuckets),
		commits:     in.seconds("idem.server.commit.duration", "Time to commit an outcome with its stored response.", storeBuckets),
		waits:       in.counter("idem.server.claim.waits", "{claim}", "Claims that waited for a running duplicate, by what they got."),
		takeovers:   in.counter("idem.server.takeovers", "{takeover}", "Leased operations taken over after their lease ended, by a retry or a reconciler."),
		tombstones:  in.counter("idem.server.tombstones", "{record}", "Records stored without a response to replay: retries get 500 result-unavailable."),
		swept:       in.counter("idem.server.swept", "{record}", "Expired records deleted by the sweeper."),
		sweeps:      in.counter("idem.server.sweeps", "{sweep}", "Sweeps, failed ones with error.type."),
		settlements: in.counter("idem.server.reconciler.settlements", "{operation}", "Abandoned operations the reconciler settled, by answer."),
	}
	if in.err != nil {
		return nil, in.err
	}
	return s, nil
}

// Hooks returns the hooks to set as [server.Config.Hooks]. To observe with
// hooks of your own too, call these hooks from yours.
func (s *Server) Hooks() server.Hooks {
	return server.Hooks{
		Claimed:         s.claimed,
		Committed:       s.committed,
		Released:        s.released,
		Replayed:        s.replayed,
		Refused:         s.refused,
		StaleCompletion: s.stale,
	}
}

func (s *Server) claimed(ctx context.Context, e server.Event) {
	s.claim(ctx, e, "claimed")
	if e.Attempt > 1 {
		s.takeovers.Add(ctx, 1, s.source(e, keyTakeoverBy, "request"))
	}
}

func (s *Server) committed(ctx context.Context, e server.Event) {
	s.commit(ctx, e, nil)
	s.count(ctx, e, VerdictExecuted)
	if e.Unavailable {
		s.tombstones.Add(ctx, 1, s.source(e, keyTombstoneBy, "response"))
	}
}

func (s *Server) released(ctx context.Context, e server.Event) {
	switch {
	case e.Problem == "commit-failed":
		s.commit(ctx, e, e.Err)
		s.count(ctx, e, VerdictCommitFailed)
	case e.Status >= 500 || e.Status == 0: // a 5xx, or a panic before any status
		s.count(ctx, e, VerdictRolledBack)
	default:
		s.count(ctx, e, VerdictRejected)
	}
}

func (s *Server) replayed(ctx context.Context, e server.Event) {
	s.claim(ctx, e, VerdictReplayed)
	s.count(ctx, e, VerdictReplayed)
}

func (s *Server) refused(ctx context.Context, e server.Event) {
	v := VerdictRefused
	switch e.Problem {
	case "key-in-flight":
		v = VerdictInFlight
	case "key-reused":
		v = VerdictKeyReused
	case "result-unavailable":
		v = VerdictResultUnavailable
	}
	if e.Elapsed > 0 { // refused after a claim
		s.claim(ctx, e, v)
	}
	s.count(ctx, e, v)
}

func (s *Server) stale(ctx context.Context, e server.Event) {
	s.commit(ctx, e, e.Err)
	s.count(ctx, e, VerdictStale)
}

// count counts a request's verdict, and sets it on the request's span.
func (s *Server) count(ctx context.Context, e server.Event, verdict string) {
	k := requestKey{route: routeOf(e), mode: e.Mode, verdict: verdict, status: e.Status}
	if verdict == VerdictRefused {
		k.problem = problemName(e.Problem)
	}
	s.requests.Add(ctx, 1, s.requestSets.get(k, requestKey.attrs))
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(keyVerdict.String(verdict))
	}
}

// claim records a claim's time under its verdict, and its span.
func (s *Server) claim(ctx context.Context, e server.Event, verdict string) {
	opt := s.stepSets.get(stepKey{route: routeOf(e), mode: e.Mode, key: keyVerdict, value: verdict, waited: e.Waited}, stepKey.attrs)
	s.claims.Record(ctx, e.Elapsed.Seconds(), opt)
	if e.Waited {
		s.waits.Add(ctx, 1, opt)
	}
	if trace.SpanFromContext(ctx).IsRecording() { // else the attributes would be allocated for nothing
		s.span(ctx, ClaimSpan, e, nil, keyVerdict.String(verdict), keyWaited.Bool(e.Waited))
	}
}

// commit records a commit's time, and its span; err is a failed one's.
func (s *Server) commit(ctx context.Context, e server.Event, err error) {
	k := stepKey{route: routeOf(e), mode: e.Mode}
	if err != nil {
		k.key, k.value = semconv.ErrorTypeKey, "commit_failed"
		if e.Problem == "key-in-flight" {
			k.value = "lease_lost"
		}
	}
	s.commits.Record(ctx, e.Elapsed.Seconds(), s.stepSets.get(k, stepKey.attrs))
	s.span(ctx, CommitSpan, e, err)
}

// span adds a child span of the request's span for a step of the store
// that just ended, which took e.Elapsed: only under a span that records,
// never as a root span of its own.
func (s *Server) span(ctx context.Context, name string, e server.Event, err error, kv ...attribute.KeyValue) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	end := time.Now()
	_, span := s.tracer.Start(ctx, name, trace.WithTimestamp(end.Add(-e.Elapsed)), trace.WithAttributes(kv...))
	if err != nil {
		span.SetAttributes(semconv.ErrorType(err))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// source returns the measurement option of a takeover or a tombstone of
// e's route: key says which, value who made it.
func (s *Server) source(e server.Event, key attribute.Key, value string) metric.MeasurementOption {
	return s.stepSets.get(stepKey{route: routeOf(e), mode: e.Mode, key: key, value: value}, stepKey.attrs)
}

// requestKey is the attribute values of a request's verdict.
type requestKey struct {
	route   routeParts
	mode    server.Mode
	verdict string
	status  int
	problem string
}

func (k requestKey) attrs() []attribute.KeyValue {
	kv := routeAttrs(k.route, k.mode, keyVerdict.String(k.verdict))
	if k.status != 0 {
		kv = append(kv, semconv.HTTPResponseStatusCode(k.status))
	}
	if k.problem != "" {
		kv = append(kv, keyProblem.String(k.problem))
	}
	return kv
}

// stepKey is the attribute values of a step of the store: a claim (key
// idem.verdict, with waited), a commit (key error.type when it failed, or
// none), a takeover or a tombstone (their source).
type stepKey struct {
	route  routeParts
	mode   server.Mode
	key    attribute.Key
	value  string
	waited bool
}

func (k stepKey) attrs() []attribute.KeyValue {
	kv := routeAttrs(k.route, k.mode)
	if k.key != "" {
		kv = append(kv, k.key.String(k.value))
	}
	if k.key == keyVerdict {
		kv = append(kv, keyWaited.Bool(k.waited))
	}
	return kv
}

// routeAttrs are a route's attributes: http.request.method and http.route
// (each when known), and idem.mode.
func routeAttrs(rt routeParts, mode server.Mode, more ...attribute.KeyValue) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 6+len(more))
	if rt.method != "" {
		kv = append(kv, semconv.HTTPRequestMethodKey.String(rt.method))
	}
	if rt.pattern != "" {
		kv = append(kv, semconv.HTTPRoute(rt.pattern))
	}
	kv = append(kv, keyMode.String(modeName(mode)))
	return append(kv, more...)
}

func modeName(m server.Mode) string {
	if m == server.Leased {
		return "leased"
	}
	return "transactional"
}
