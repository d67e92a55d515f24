package otelidem

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
)

// AttemptSpan is the name of the span of each attempt a client puts on the
// wire.
const AttemptSpan = "idem.attempt"

// Client turns the events of idem clients into spans and measurements.
// Install its Observer in [idem.Config]; one Client may serve any number of
// Transports. It is safe for concurrent use.
//
// Each attempt on the wire gets a span ([AttemptSpan], kind internal), a
// child of the span in the request's context, started just before the
// attempt is sent and ended when it ended. A base transport instrumented
// with otelhttp.NewTransport makes its HTTP client span, and puts the trace
// context on the wire, under it: use otelhttp as [idem.Config.Base] (idem
// outside otelhttp), so that every attempt is its own HTTP request in the
// trace and the server's spans hang under the attempt that reached it.
type Client struct {
	tracer trace.Tracer // nil: no span (Config.TracerProvider is a no-op)
	// counted and spanned are c.endCount and c.endSpan, made once: a
	// method value made in onSend would be allocated on every attempt.
	counted, spanned func(idem.Attempt)

	attempts    metric.Int64Counter
	waits       metric.Float64Histogram // its count is the retries
	denials     metric.Int64Counter
	transitions metric.Int64Counter
	open        metric.Int64UpDownCounter
	failures    metric.Int64Counter

	attemptSets sets[attemptKey]
	retrySets   sets[retryKey]
	callSets    sets[callKey]

	mu     sync.Mutex
	opened map[string]bool // hosts whose breaker is counted open
}

// NewClient returns a [Client] that reports to cfg's providers. It fails
// only when the meter refuses an instrument.
func NewClient(cfg Config) (*Client, error) {
	in := &instruments{m: cfg.meter()}
	c := &Client{
		tracer:      cfg.spanTracer(),
		attempts:    in.counter("idem.client.attempts", "{attempt}", "Requests put on the wire, by outcome; net/http's own re-sends of an attempt included."),
		waits:       in.seconds("idem.client.retry.wait", "Time waited before each retry (backoff, Retry-After or a Classifier's wait), by the outcome of the attempt retried: its count is the retries.", waitBuckets),
		denials:     in.counter("idem.client.budget.denials", "{retry}", "Retries that the retry budget denied (each ends its call)."),
		transitions: in.counter("idem.client.breaker.transitions", "{transition}", "State changes of a host's circuit breaker."),
		open:        in.upDown("idem.client.breaker.open", "{breaker}", "Circuit breakers open, per host (1 while the host's is open)."),
		failures:    in.counter("idem.client.errors", "{call}", "Calls that ended with an error, by kind."),
		opened:      map[string]bool{},
	}
	if in.err != nil {
		return nil, in.err
	}
	c.counted, c.spanned = c.endCount, c.endSpan
	return c, nil
}

// Observer returns the hooks to set as [idem.Config.Observer]. To observe
// with hooks of your own too, call this Observer's hooks from yours.
func (c *Client) Observer() idem.Observer {
	return idem.Observer{
		OnSend:          c.onSend,
		OnRetry:         c.onRetry,
		OnGiveUp:        c.onGiveUp,
		OnBreakerChange: c.onBreakerChange,
	}
}

// internal is the start option of every attempt span, and startOptions
// the slice onSend passes, made once rather than on every attempt.
var (
	internal     = trace.WithSpanKind(trace.SpanKindInternal)
	startOptions = []trace.SpanStartOption{internal}
)

// onSend starts the attempt's span and returns its context: ended finds
// the span there, in the context of the request the Attempt it is given
// names. An attempt whose span does not record (no SDK, or not sampled)
// keeps its context, and only counts when it ended; with a no-op
// TracerProvider no span is started at all.
func (c *Client) onSend(ctx context.Context, _ idem.Attempt) (context.Context, func(idem.Attempt)) {
	if c.tracer == nil {
		return ctx, c.counted
	}
	sctx, span := c.tracer.Start(ctx, AttemptSpan, startOptions...)
	if !span.IsRecording() {
		return ctx, c.counted
	}
	return sctx, c.spanned
}

// endCount counts an attempt that ended.
func (c *Client) endCount(a idem.Attempt) {
	k := attemptKey{method: method(a.Request.Method), endpoint: endpointOf(a.Request.URL),
		certainty: a.Certainty, status: a.Status, problem: problemName(a.Problem), hedge: a.Hedge}
	c.attempts.Add(a.Request.Context(), int64(max(a.Wire, 1)), c.attemptSets.get(k, attemptKey.attrs))
}

// endSpan counts an attempt that ended and ends its span, which onSend
// put in the attempt's context, setting every attribute at once.
func (c *Client) endSpan(a idem.Attempt) {
	c.endCount(a)
	span := trace.SpanFromContext(a.Request.Context())
	switch {
	case a.Err != nil:
		span.SetStatus(codes.Error, a.Err.Error())
	case a.Status >= 500:
		span.SetStatus(codes.Error, "")
	}
	span.SetAttributes(spanAttrs(make([]attribute.KeyValue, 0, spanAttrCount(a)), a)...)
	span.End()
}

// spanAttrCount is how many attributes spanAttrs gives a: the slice is
// allocated at that size, not at the most there can be.
func spanAttrCount(a idem.Attempt) int {
	n := 6 // method, key present, address, port, certainty, and one to spare
	for _, ok := range [...]bool{a.Number > max(a.Wire, 1), a.Hedge, a.Resend.Certainty != 0, a.Resend.Certainty != 0,
		a.Status != 0, a.Problem != "", a.Wire > 1, a.Err != nil} {
		if ok {
			n++
		}
	}
	return n
}

// spanAttrs appends to kv what an attempt's span says of it: where it
// went, why it was sent, what it got.
func spanAttrs(kv []attribute.KeyValue, a idem.Attempt) []attribute.KeyValue {
	kv = append(kv, semconv.HTTPRequestMethodKey.String(method(a.Request.Method)), keyKeyPresent.Bool(a.Key != ""))
	kv = endpointOf(a.Request.URL).attrs(kv)
	if resent := a.Number - max(a.Wire, 1); resent > 0 { // the requests of the call before this attempt
		kv = append(kv, semconv.HTTPRequestResendCount(resent))
	}
	if a.Hedge {
		kv = append(kv, keyHedge.Bool(true))
	}
	if r := a.Resend; r.Certainty != 0 {
		kv = append(kv, keyRetryReason.String(retryReason(r.Certainty, r.Problem)), keyRetryWait.Float64(r.Wait.Seconds()))
	}
	kv = append(kv, keyCertainty.String(certainty(a.Certainty)))
	if a.Status != 0 {
		kv = append(kv, semconv.HTTPResponseStatusCode(a.Status))
	}
	if p := problemName(a.Problem); p != "" {
		kv = append(kv, keyProblem.String(p))
	}
	if a.Wire > 1 {
		kv = append(kv, keyWire.Int(a.Wire))
	}
	if a.Err != nil {
		kv = append(kv, semconv.ErrorType(a.Err))
	}
	return kv
}

// onRetry records a retry's wait, which counts the retry too: one
// measurement where a counter beside the histogram would make two, as
// OpenTelemetry's HTTP conventions count requests by their duration
// histogram.
func (c *Client) onRetry(a idem.Attempt, wait time.Duration) {
	k := retryKey{method: method(a.Request.Method), endpoint: endpointOf(a.Request.URL),
		reason: retryReason(a.Certainty, a.Problem)}
	if k.reason == reasonStatus {
		k.status = a.Status
	}
	c.waits.Record(a.Request.Context(), wait.Seconds(), c.retrySets.get(k, retryKey.attrs))
}

// onGiveUp counts a call that ended with an error, and a budget denial.
func (c *Client) onGiveUp(a idem.Attempt, err error) {
	k := callKey{method: method(a.Request.Method), endpoint: endpointOf(a.Request.URL), kind: errorKind(err)}
	var e *idem.Error
	if errors.As(err, &e) {
		k.unknown = e.MayHaveTakenEffect
	}
	ctx := a.Request.Context()
	c.failures.Add(ctx, 1, c.callSets.get(k, callKey.attrs))
	if k.kind == "budget_exhausted" {
		c.denials.Add(ctx, 1, metric.WithAttributes(k.endpoint.attrs(nil)...))
	}
}

// onBreakerChange counts a host's breaker changing state, and keeps the
// open-breakers count.
func (c *Client) onBreakerChange(host string, from, to idem.BreakerState) {
	ctx := context.Background()
	kv := hostAttrs(host)
	c.transitions.Add(ctx, 1, metric.WithAttributes(append(kv,
		keyBreakerPrev.String(from.String()), keyBreakerState.String(to.String()))...))
	c.mu.Lock()
	defer c.mu.Unlock()
	switch open := to == idem.BreakerOpen; {
	case open && !c.opened[host]:
		c.opened[host] = true
		c.open.Add(ctx, 1, metric.WithAttributes(kv...))
	case !open && c.opened[host]:
		delete(c.opened, host)
		c.open.Add(ctx, -1, metric.WithAttributes(kv...))
	}
}

// hostAttrs are the attributes of a breaker's host, "scheme://host:port".
func hostAttrs(host string) []attribute.KeyValue {
	u, err := url.Parse(host)
	if err != nil {
		return []attribute.KeyValue{semconv.ServerAddress(host)}
	}
	return endpointOf(u).attrs([]attribute.KeyValue{semconv.URLScheme(u.Scheme)})
}
