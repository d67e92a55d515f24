package otelidem

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the spans and instruments
// that this package makes.
const ScopeName = "github.com/idemkit/idem/otelidem"

// Config says where the spans and the measurements go. Its zero value
// means OpenTelemetry's global providers (otel.GetTracerProvider,
// otel.GetMeterProvider), which record nothing until the application
// installs an SDK.
type Config struct {
	// TracerProvider makes the spans. Nil: otel.GetTracerProvider(). For
	// metrics without spans, set it (or the global one) to
	// noop.NewTracerProvider() (package go.opentelemetry.io/otel/trace/noop):
	// a [Client] then starts no span at all, which spares each attempt the
	// no-op span's start.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments. Nil: otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

// tracer and meter return the scope's tracer and meter of cfg's providers.
func (cfg Config) tracer() trace.Tracer {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}

// spanTracer is tracer, or nil when it is the no-op one (set in [Config]
// or as the global provider), whose spans a [Client] need not start.
func (cfg Config) spanTracer() trace.Tracer {
	t := cfg.tracer()
	if _, ok := t.(noop.Tracer); ok {
		return nil
	}
	return t
}

func (cfg Config) meter() metric.Meter {
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(ScopeName)
}

// instruments creates a meter's instruments, keeping the first error.
type instruments struct {
	m   metric.Meter
	err error
}

func (in *instruments) counter(name, unit, desc string) metric.Int64Counter {
	c, err := in.m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.keep(err)
	return c
}

func (in *instruments) upDown(name, unit, desc string) metric.Int64UpDownCounter {
	c, err := in.m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.keep(err)
	return c
}

func (in *instruments) seconds(name, desc string, bounds []float64) metric.Float64Histogram {
	h, err := in.m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(bounds...))
	in.keep(err)
	return h
}

func (in *instruments) gauge(name, unit, desc string) metric.Int64ObservableGauge {
	g, err := in.m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.keep(err)
	return g
}

func (in *instruments) age(name, desc string) metric.Float64ObservableGauge {
	g, err := in.m.Float64ObservableGauge(name, metric.WithUnit("s"), metric.WithDescription(desc))
	in.keep(err)
	return g
}

func (in *instruments) keep(err error) {
	if in.err == nil && err != nil {
		in.err = err
	}
}

// Bucket boundaries, in seconds: a store's step (a claim, a commit) takes
// a millisecond or a few, a wait for a running duplicate up to the wait
// bound (2 s by default); a wait before a retry up to a Retry-After's
// clamp (30 s by default).
var (
	storeBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	waitBuckets  = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)
