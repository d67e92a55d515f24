package otelidem

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/idemkit/idem"
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
	cfg := idem.Config{Base: inMemory(attempts), NoBudget: true, Breaker: idem.BreakerConfig{Disabled: true},
		Backoff: idem.Backoff{Base: 1, Cap: 1}} // 1 ns: no real wait
	if mode != "off" {
		c, err := NewClient(benchConfig(b, mode))
		if err != nil {
			b.Fatal(err)
		}
		cfg.Observer = c.Observer()
	}
	rt := idem.NewTransport(cfg)
	body := []byte(`{"amount":100}`)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/payments", bytes.NewReader(body))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*attempts), "ns/attempt")
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
