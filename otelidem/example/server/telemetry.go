package main

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/idemkit/idem/otelidem"
)

// telemetry is the program's OpenTelemetry SDK: a meter provider whose
// reader is the Prometheus exporter, on a registry of the program's own,
// and otelidem's instrumentation of the server and of the gateway client.
// It makes no spans: the program has no trace exporter.
type telemetry struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	server   *otelidem.Server
	client   *otelidem.Client
}

func newTelemetry() (*telemetry, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	cfg := otelidem.Config{MeterProvider: mp}
	srv, err := otelidem.NewServer(cfg)
	if err != nil {
		return nil, err
	}
	client, err := otelidem.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return &telemetry{registry: reg, provider: mp, server: srv, client: client}, nil
}

// handler serves the metrics at /metrics.
func (t *telemetry) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{}))
	return mux
}

func (t *telemetry) shutdown() { _ = t.provider.Shutdown(context.Background()) }
