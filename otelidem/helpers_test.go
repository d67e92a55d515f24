package otelidem

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// telemetry is an SDK that keeps every span in memory and whose metrics
// are read on demand.
type telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	cfg    Config
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	return &telemetry{spans: spans, reader: reader, cfg: Config{TracerProvider: tp, MeterProvider: mp}}
}

// points collects the metrics and returns the data points of the named
// instrument whose attributes include every one of want, as (attributes,
// value) pairs: a sum's or a gauge's value, a histogram's count.
func (tm *telemetry) points(t *testing.T, name string, want ...attribute.KeyValue) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tm.reader.Collect(context.Background(), &rm))
	var out []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				out = append(out, pointsOf(m.Data)...)
			}
		}
	}
	return matching(out, want)
}

// value sums the values of points (see points).
func (tm *telemetry) value(t *testing.T, name string, want ...attribute.KeyValue) float64 {
	t.Helper()
	sum := 0.0
	for _, p := range tm.points(t, name, want...) {
		sum += p.value
	}
	return sum
}

type point struct {
	attrs attribute.Set
	value float64
}

func pointsOf(data metricdata.Aggregation) []point {
	var out []point
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, point{dp.Attributes, float64(dp.Value)})
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, point{dp.Attributes, float64(dp.Value)})
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, point{dp.Attributes, dp.Value})
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, point{dp.Attributes, float64(dp.Count)})
		}
	}
	return out
}

func matching(points []point, want []attribute.KeyValue) []point {
	var out []point
next:
	for _, p := range points {
		for _, kv := range want {
			if v, ok := p.attrs.Value(kv.Key); !ok || v != kv.Value {
				continue next
			}
		}
		out = append(out, p)
	}
	return out
}

// attrsOf returns a span's attributes by key.
func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// spansNamed returns the ended spans of that name, in the order they ended.
func (tm *telemetry) spansNamed(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tm.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// roundTripFunc is an http.RoundTripper of a function: an in-memory server.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// respond returns a response of status with body, as a server's.
func respond(r *http.Request, status int, body string) *http.Response {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}
}

// problem returns a problem+json response naming a contract problem.
func problem(r *http.Request, status int, name string) *http.Response {
	resp := respond(r, status, `{"type":"urn:idem:problem:`+name+`","status":`+strconv.Itoa(status)+`}`)
	resp.Header.Set("Content-Type", "application/problem+json")
	return resp
}

// post returns a POST of a small JSON body to url under ctx.
func post(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"amount":1}`))
	require.NoError(t, err)
	return req
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func readBody(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}
