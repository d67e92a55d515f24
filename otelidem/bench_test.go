package otelidem

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/proccpu"
)

// BenchmarkClientTelemetry measures what the telemetry adds to a call of
// the idem client, in memory (no network: the base answers at once):
//
//   - off: no Observer;
//   - metrics: the Client's metrics on the SDK (a manual reader, as a
//     Prometheus exporter has), spans to a no-op tracer;
//   - traces+metrics: also every span recorded by the SDK (always
//     sampled, no exporter: a span's cost up to its export).
//
// attempts=1 is a call that succeeds at once; attempts=3 a call retried
// twice (503, 503, 200; no wait), whose ns/attempt divides by 3.
// cpu-ns/attempt is the process's CPU time (the garbage collector's
// included) over the loop, per attempt: the steadier figure on a shared
// machine, where wall time also counts the waits for a core.
//
//	go test -run '^$' -bench BenchmarkClientTelemetry -benchmem -count 10 ./otelidem/
func BenchmarkClientTelemetry(b *testing.B) {
	for _, attempts := range []int{1, 3} {
		for _, mode := range []string{"off", "metrics", "traces+metrics"} {
			b.Run(benchName(attempts, mode), func(b *testing.B) { benchCalls(b, attempts, mode) })
		}
	}
}

func benchName(attempts int, mode string) string {
	if attempts == 1 {
		return "attempts=1/" + mode
	}
	return "attempts=3/" + mode
}

func benchCalls(b *testing.B, attempts int, mode string) {
	rt := benchTransport(b, attempts, mode)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := proccpu.Used()
	for b.Loop() {
		call(b, rt)
	}
	cpu = proccpu.Used() - cpu
	n := float64(b.N * attempts)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/attempt")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/attempt")
}

// BenchmarkClientTelemetryPaired sends, in each round, one call through a
// client without telemetry and one through a client with it, the order
// swapped every round, and reports the difference per attempt
// (overhead-ns/attempt): drift and the machine's other load hit both alike,
// which separate runs of BenchmarkClientTelemetry's variants cannot
// promise on a busy machine.
//
//	go test -run '^$' -bench BenchmarkClientTelemetryPaired -benchtime 20000x -count 10 ./otelidem/
func BenchmarkClientTelemetryPaired(b *testing.B) {
	for _, attempts := range []int{1, 3} {
		for _, mode := range []string{"metrics", "traces+metrics"} {
			b.Run(benchName(attempts, mode), func(b *testing.B) {
				off, on := benchTransport(b, attempts, "off"), benchTransport(b, attempts, mode)
				var tOff, tOn time.Duration
				for i := 0; b.Loop(); i++ {
					first, second := off, on
					if i%2 == 1 {
						first, second = on, off
					}
					t0 := time.Now()
					call(b, first)
					t1 := time.Now()
					call(b, second)
					t2 := time.Now()
					if i%2 == 1 {
						tOn, tOff = tOn+t1.Sub(t0), tOff+t2.Sub(t1)
					} else {
						tOff, tOn = tOff+t1.Sub(t0), tOn+t2.Sub(t1)
					}
				}
				n := float64(b.N * attempts)
				b.ReportMetric(float64(tOff.Nanoseconds())/n, "off-ns/attempt")
				b.ReportMetric(float64((tOn-tOff).Nanoseconds())/n, "overhead-ns/attempt")
			})
		}
	}
}

// benchTransport returns an idem Transport over an in-memory base that
// answers 200 after attempts-1 503s, with the telemetry of mode.
func benchTransport(b *testing.B, attempts int, mode string) *idem.Transport {
	cfg := idem.Config{Base: inMemory(attempts), NoBudget: true, Breaker: idem.BreakerConfig{Disabled: true},
		Backoff: idem.Backoff{Base: 1, Cap: 1}} // full jitter of 1 ns: every wait is 0
	if mode != "off" {
		c, err := NewClient(benchConfig(b, mode))
		if err != nil {
			b.Fatal(err)
		}
		cfg.Observer = c.Observer()
	}
	return idem.NewTransport(cfg)
}

var benchBody = []byte(`{"amount":100}`)

// call makes one keyed POST through rt.
func call(b *testing.B, rt http.RoundTripper) {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://api.test/v1/payments", bytes.NewReader(benchBody))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
}

func benchConfig(b *testing.B, mode string) Config {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	if mode == "metrics" {
		return Config{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider()}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return Config{MeterProvider: mp, TracerProvider: tp}
}

// inMemory answers 503 to all but every attempts-th request, 200 to those.
func inMemory(attempts int) http.RoundTripper {
	n := 0
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		status := http.StatusOK
		if n%attempts != 0 {
			status = http.StatusServiceUnavailable
		}
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
}

// BenchmarkSDKSpan is the floor under the traces' cost: one span started
// and ended by the SDK (always sampled, no exporter), with no attribute,
// and with the 9 attributes a retried attempt's span has.
//
//	go test -run '^$' -bench BenchmarkSDKSpan -benchmem -count 10 ./otelidem/
func BenchmarkSDKSpan(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer(ScopeName)
	req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/payments", nil)
	a := idem.Attempt{Request: req, Key: "k", Number: 2, Wire: 1, Certainty: idem.Responded, Status: 201,
		Resend: idem.Resend{Certainty: idem.Responded, Status: 503}}
	for _, attrs := range []bool{false, true} {
		b.Run(map[bool]string{false: "bare", true: "attempt attributes"}[attrs], func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				_, span := tracer.Start(ctx, AttemptSpan, internal)
				if attrs {
					span.SetAttributes(spanAttrs(make([]attribute.KeyValue, 0, spanAttrCount(a)), a)...)
				}
				span.End()
			}
		})
	}
}

// BenchmarkSDKMeasurements is the floor under the metrics' cost: what the
// SDK alone (a manual reader, as a Prometheus exporter has) spends on the
// measurements otelidem makes, with their attribute sets built once as
// otelidem caches them. "attempt" is the counter every attempt adds to;
// "retry" is what a retried attempt adds on top: the wait histogram, whose
// count is the retries.
//
//	go test -run '^$' -bench BenchmarkSDKMeasurements -benchmem -count 10 ./otelidem/
func BenchmarkSDKMeasurements(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	in := &instruments{m: mp.Meter(ScopeName)}
	attempts := in.counter("idem.client.attempts", "{attempt}", "")
	waits := in.seconds("idem.client.retry.wait", "", waitBuckets)
	if in.err != nil {
		b.Fatal(in.err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/payments", nil)
	ep := endpointOf(req.URL)
	attemptSet := metric.WithAttributeSet(attribute.NewSet(attemptKey{method: "POST", endpoint: ep,
		certainty: idem.Responded, status: 503}.attrs()...))
	retrySet := metric.WithAttributeSet(attribute.NewSet(retryKey{method: "POST", endpoint: ep,
		reason: reasonStatus, status: 503}.attrs()...))
	ctx := context.Background()
	b.Run("attempt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			attempts.Add(ctx, 1, attemptSet)
		}
	})
	b.Run("retry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			waits.Record(ctx, 0.05, retrySet)
		}
	})
}
