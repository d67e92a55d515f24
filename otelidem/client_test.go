package otelidem

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/idemkit/idem"
)

// scriptedBase answers the n-th request (from 1) with script(n), in memory.
func scriptedBase(script func(n int, r *http.Request) (*http.Response, error)) http.RoundTripper {
	var calls atomic.Int32
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return script(int(calls.Add(1)), r)
	})
}

// twoResends: a 503, then a response cut off (ambiguous), then a 201.
func twoResends(n int, r *http.Request) (*http.Response, error) {
	switch n {
	case 1:
		return respond(r, http.StatusServiceUnavailable, `{}`), nil
	case 2:
		return nil, io.ErrUnexpectedEOF
	}
	return respond(r, http.StatusCreated, `{"id":1}`), nil
}

func fastRetries(cfg idem.Config) idem.Config {
	cfg.Backoff = idem.Backoff{Base: time.Millisecond, Cap: time.Millisecond}
	cfg.NoBudget = cfg.Budget == nil
	return cfg
}

// A call with two resends makes three attempt spans under the caller's
// span, each saying what it re-sends and why, and what it got; with
// otelhttp as the base, each attempt's HTTP client span is its child.
func TestAttemptSpansOfACallWithTwoResends(t *testing.T) {
	for _, withOtelhttp := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain base", true: "otelhttp base"}[withOtelhttp], func(t *testing.T) {
			tm := newTelemetry(t)
			c, err := NewClient(tm.cfg)
			require.NoError(t, err)
			base := scriptedBase(twoResends)
			if withOtelhttp {
				base = otelhttp.NewTransport(base, otelhttp.WithTracerProvider(tm.cfg.TracerProvider),
					otelhttp.WithMeterProvider(tm.cfg.MeterProvider))
			}
			client := idem.NewClient(fastRetries(idem.Config{Base: base, Observer: c.Observer()}))
			ctx, caller := tm.cfg.TracerProvider.Tracer("test").Start(context.Background(), "caller")
			resp, err := client.Do(post(t, ctx, "http://api.test:8080/v1/payments"))
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			caller.End()

			attempts := tm.spansNamed(AttemptSpan)
			require.Len(t, attempts, 3)
			for i, s := range attempts {
				assert.Equal(t, caller.SpanContext().SpanID(), s.Parent().SpanID(), "attempt %d's parent is the caller's span", i+1)
				assert.Equal(t, trace.SpanKindInternal, s.SpanKind())
				a := attrsOf(s)
				assert.Equal(t, "POST", a[semconv.HTTPRequestMethodKey].AsString())
				assert.Equal(t, "api.test", a[semconv.ServerAddressKey].AsString())
				assert.EqualValues(t, 8080, a[semconv.ServerPortKey].AsInt64())
				assert.True(t, a[keyKeyPresent].AsBool(), "the call is keyed")
			}
			first, second, third := attrsOf(attempts[0]), attrsOf(attempts[1]), attrsOf(attempts[2])
			assert.NotContains(t, first, semconv.HTTPRequestResendCountKey, "the first attempt re-sends nothing")
			assert.NotContains(t, first, keyRetryReason)
			assert.EqualValues(t, 503, first[semconv.HTTPResponseStatusCodeKey].AsInt64())
			assert.Equal(t, "responded", first[keyCertainty].AsString())

			assert.EqualValues(t, 1, second[semconv.HTTPRequestResendCountKey].AsInt64())
			assert.Equal(t, "status", second[keyRetryReason].AsString(), "it retries the 503")
			assert.Greater(t, second[keyRetryWait].AsFloat64(), 0.0, "after a backoff")
			assert.Equal(t, "ambiguous", second[keyCertainty].AsString())
			assert.Equal(t, "*errors.errorString", second[semconv.ErrorTypeKey].AsString())
			assert.NotContains(t, second, semconv.HTTPResponseStatusCodeKey)

			assert.EqualValues(t, 2, third[semconv.HTTPRequestResendCountKey].AsInt64())
			assert.Equal(t, "ambiguous", third[keyRetryReason].AsString(), "it retries the lost response")
			assert.EqualValues(t, 201, third[semconv.HTTPResponseStatusCodeKey].AsInt64())

			if withOtelhttp {
				var clients []trace.SpanID
				for _, s := range tm.spans.Ended() {
					if s.SpanKind() == trace.SpanKindClient {
						clients = append(clients, s.Parent().SpanID())
					}
				}
				want := []trace.SpanID{attempts[0].SpanContext().SpanID(), attempts[1].SpanContext().SpanID(), attempts[2].SpanContext().SpanID()}
				assert.ElementsMatch(t, want, clients, "otelhttp's span of each attempt is the attempt span's child")
			}
		})
	}
}

// The same call moves the attempt counter by outcome, and the wait
// histogram once per retry, by reason (its count is the retries).
func TestAttemptAndRetryMetrics(t *testing.T) {
	tm := newTelemetry(t)
	c, err := NewClient(tm.cfg)
	require.NoError(t, err)
	client := idem.NewClient(fastRetries(idem.Config{Base: scriptedBase(twoResends), Observer: c.Observer()}))
	resp, err := client.Do(post(t, context.Background(), "http://api.test/v1/payments"))
	require.NoError(t, err)
	resp.Body.Close()

	host := []attribute.KeyValue{semconv.ServerAddress("api.test"), semconv.ServerPort(80), semconv.HTTPRequestMethodKey.String("POST")}
	assert.Equal(t, 3.0, tm.value(t, "idem.client.attempts", host...))
	assert.Equal(t, 1.0, tm.value(t, "idem.client.attempts", keyCertainty.String("responded"), semconv.HTTPResponseStatusCode(503)))
	assert.Equal(t, 1.0, tm.value(t, "idem.client.attempts", keyCertainty.String("ambiguous")))
	assert.Equal(t, 1.0, tm.value(t, "idem.client.attempts", keyCertainty.String("responded"), semconv.HTTPResponseStatusCode(201)))
	assert.Equal(t, 1.0, tm.value(t, "idem.client.retry.wait", keyRetryReason.String("status"), semconv.HTTPResponseStatusCode(503)))
	assert.Equal(t, 1.0, tm.value(t, "idem.client.retry.wait", keyRetryReason.String("ambiguous")))
	assert.Equal(t, 2.0, tm.value(t, "idem.client.retry.wait", host...), "two waits recorded")
	var rm metricdata.ResourceMetrics
	require.NoError(t, tm.reader.Collect(context.Background(), &rm))
	for _, m := range rm.ScopeMetrics[0].Metrics {
		assert.NotEqual(t, "idem.client.retries", m.Name, "the wait histogram's count is the retries")
	}
	assert.Zero(t, tm.value(t, "idem.client.errors"), "the call succeeded")
}

// A retry that the budget denies a fail-fast call moves the denial counter
// and ends the call with error.type budget_exhausted (and outcome unknown: a 503 may
// come from a gateway after the operation ran).
func TestBudgetDenialCounted(t *testing.T) {
	tm := newTelemetry(t)
	c, err := NewClient(tm.cfg)
	require.NoError(t, err)
	budget := idem.NewBudget(idem.BudgetConfig{FloorRate: -1}) // nothing earned, no floor
	base := scriptedBase(func(_ int, r *http.Request) (*http.Response, error) { return respond(r, 503, `{}`), nil })
	client := idem.NewClient(fastRetries(idem.Config{Base: base, Budget: budget, FailFast: true, Observer: c.Observer()}))
	_, err = client.Do(post(t, context.Background(), "http://api.test/v1/payments"))
	require.ErrorIs(t, err, idem.ErrBudgetExhausted)

	assert.Equal(t, 1.0, tm.value(t, "idem.client.budget.denials", semconv.ServerAddress("api.test")))
	assert.Equal(t, 1.0, tm.value(t, "idem.client.errors", semconv.ErrorTypeKey.String("budget_exhausted"), keyOutcomeUnknown.Bool(true)))
	assert.Zero(t, tm.value(t, "idem.client.retry.wait"), "no retry was made")
}

// A breaker trip counts the transition and raises the host's open-breaker
// gauge; the fail-fast call it then refuses ends with error.type
// circuit_open, and puts nothing on the wire.
func TestBreakerTripCounted(t *testing.T) {
	tm := newTelemetry(t)
	c, err := NewClient(tm.cfg)
	require.NoError(t, err)
	base := scriptedBase(func(_ int, r *http.Request) (*http.Response, error) { return respond(r, 503, `{}`), nil })
	client := idem.NewClient(fastRetries(idem.Config{Base: base, MaxAttempts: 1, FailFast: true,
		Breaker: idem.BreakerConfig{ConsecutiveFailures: 2}, Observer: c.Observer()}))
	for range 3 {
		resp, err := client.Do(post(t, context.Background(), "https://api.test/v1/payments"))
		if err == nil {
			resp.Body.Close()
		}
	}
	host := []attribute.KeyValue{semconv.URLScheme("https"), semconv.ServerAddress("api.test"), semconv.ServerPort(443)}
	assert.Equal(t, 1.0, tm.value(t, "idem.client.breaker.transitions",
		append(host, keyBreakerPrev.String("closed"), keyBreakerState.String("open"))...))
	assert.Equal(t, 1.0, tm.value(t, "idem.client.breaker.open", host...), "the host's breaker is open")
	assert.Equal(t, 1.0, tm.value(t, "idem.client.errors", semconv.ErrorTypeKey.String("circuit_open")))
	assert.Equal(t, 2.0, tm.value(t, "idem.client.attempts"), "the refused attempt was not sent")
}

// A 409 key-in-flight, then a 422 key-reused: the attempts carry the
// problem, the retry says key_in_flight, the call ends key_reused.
func TestContractProblemsCounted(t *testing.T) {
	tm := newTelemetry(t)
	c, err := NewClient(tm.cfg)
	require.NoError(t, err)
	base := scriptedBase(func(n int, r *http.Request) (*http.Response, error) {
		if n == 1 {
			return problem(r, http.StatusConflict, "key-in-flight"), nil
		}
		return problem(r, http.StatusUnprocessableEntity, "key-reused"), nil
	})
	client := idem.NewClient(fastRetries(idem.Config{Base: base, Observer: c.Observer()}))
	_, err = client.Do(post(t, context.Background(), "http://api.test/v1/payments"))
	require.True(t, errors.Is(err, idem.ErrKeyReused), "%v", err)

	assert.Equal(t, 1.0, tm.value(t, "idem.client.attempts", keyProblem.String("key-in-flight"), semconv.HTTPResponseStatusCode(409)))
	assert.Equal(t, 1.0, tm.value(t, "idem.client.attempts", keyProblem.String("key-reused"), semconv.HTTPResponseStatusCode(422)))
	assert.Equal(t, 1.0, tm.value(t, "idem.client.retry.wait", keyRetryReason.String("key_in_flight")))
	assert.Equal(t, 1.0, tm.value(t, "idem.client.errors", semconv.ErrorTypeKey.String("key_reused")))
}

// With a no-op TracerProvider (metrics only), in Config or as the global
// provider, a Client starts no span: an attempt's send allocates nothing
// and keeps its context. With the SDK's, it does start them.
func TestNoSpanStartedWithANoopTracerProvider(t *testing.T) {
	tm := newTelemetry(t)
	global := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(global) })
	otel.SetTracerProvider(noop.NewTracerProvider())
	for name, cfg := range map[string]Config{
		"in Config": {TracerProvider: noop.NewTracerProvider(), MeterProvider: tm.cfg.MeterProvider},
		"global":    {MeterProvider: tm.cfg.MeterProvider},
	} {
		c, err := NewClient(cfg)
		require.NoError(t, err)
		assert.Nil(t, c.tracer, name)
		ctx := context.Background()
		var got context.Context
		allocs := testing.AllocsPerRun(100, func() { got, _ = c.onSend(ctx, idem.Attempt{}) })
		assert.Zero(t, allocs, name)
		assert.Equal(t, ctx, got, "%s: the attempt keeps its context", name)
	}
	c, err := NewClient(tm.cfg)
	require.NoError(t, err)
	assert.NotNil(t, c.tracer, "the SDK's provider: spans are started")
}
