package otelidem

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
)

// Deliveries are counted by outcome, and the outbox's depth is a gauge:
// one message delivered, one refused (parked), one retried on a 503.
func TestOutboxDeliveriesAndDepth(t *testing.T) {
	tm := newTelemetry(t)
	o, err := NewOutbox(tm.cfg)
	require.NoError(t, err)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Idempotency-Key") {
		case "refused":
			w.WriteHeader(http.StatusBadRequest)
		case "busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	t.Cleanup(receiver.Close)
	q := outbox.NewMemory(outbox.Config{Observer: o.Observer(), Logger: quietLog(),
		Client:     idem.Config{MaxAttempts: 1, NoBudget: true},
		MinBackoff: time.Hour, MaxBackoff: time.Hour}) // a retried message stays pending
	reg, err := o.ObserveStats(q)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Unregister() })
	ctx := context.Background()
	for _, key := range []string{"ok", "refused", "busy"} {
		_, err := q.Enqueue(ctx, outbox.Message{Name: "payment.created", Key: key, Method: "POST", URL: receiver.URL + "/hooks"})
		require.NoError(t, err)
	}
	assert.Equal(t, 3.0, tm.value(t, "idem.outbox.pending"))
	run, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- q.Run(run) }()
	require.Eventually(t, func() bool { return tm.value(t, "idem.outbox.deliveries") == 3 }, 10*time.Second, time.Millisecond)
	stop()
	require.NoError(t, <-done)

	name := keyMessageName.String("payment.created")
	assert.Equal(t, 1.0, tm.value(t, "idem.outbox.deliveries", name, keyDelivery.String("delivered"), semconv.HTTPResponseStatusCode(201)))
	assert.Equal(t, 1.0, tm.value(t, "idem.outbox.deliveries", name, keyDelivery.String("parked"),
		keyParkReason.String("refused"), semconv.HTTPResponseStatusCode(400)))
	assert.Equal(t, 1.0, tm.value(t, "idem.outbox.deliveries", name, keyDelivery.String("retried"), semconv.HTTPResponseStatusCode(503)))
	assert.Equal(t, 1.0, tm.value(t, "idem.outbox.pending"), "the retried message")
	assert.Equal(t, 1.0, tm.value(t, "idem.outbox.parked"))
	assert.Len(t, tm.points(t, "idem.outbox.pending.oldest_age"), 1)
}

// A dispatcher that sends to 100 webhook hosts makes 100 series of each
// client instrument, one per server.address; the view that the outbox's
// package doc gives ("Telemetry of many destinations") drops the host
// from every idem.client instrument, leaving one series for the 100
// deliveries (issue 28: the cost of server.address, and the way to drop
// it).
func TestOutboxClientMetricsWithoutTheHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop bool
	}{{"as it is", false}, {"host dropped by a view", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []sdkmetric.Option
			if tc.drop {
				opts = append(opts, sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "idem.client.*"},
					sdkmetric.Stream{AttributeFilter: attribute.NewDenyKeysFilter(semconv.ServerAddressKey, semconv.ServerPortKey)})))
			}
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(append(opts, sdkmetric.WithReader(reader))...)
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			c, err := NewClient(Config{MeterProvider: mp})
			require.NoError(t, err)
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) { return respond(r, http.StatusCreated, `{}`), nil })
			delivered := make(chan struct{}, 100)
			q := outbox.NewMemory(outbox.Config{Logger: quietLog(),
				Client:   idem.Config{Base: base, Observer: c.Observer(), NoBudget: true},
				Observer: outbox.Observer{Delivered: func(context.Context, outbox.Delivery) { delivered <- struct{}{} }}})
			ctx := context.Background()
			for i := range 100 {
				_, err := q.Enqueue(ctx, outbox.Message{Name: "webhook", Method: "POST", URL: fmt.Sprintf("https://hook-%d.example/events", i)})
				require.NoError(t, err)
			}
			run, stop := context.WithCancel(ctx)
			done := make(chan error)
			go func() { done <- q.Run(run) }()
			for range 100 {
				<-delivered
			}
			stop()
			require.NoError(t, <-done)

			var rm metricdata.ResourceMetrics
			require.NoError(t, reader.Collect(ctx, &rm))
			hosts, attempts := map[string]bool{}, 0
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if !strings.HasPrefix(m.Name, "idem.client.") {
						continue
					}
					for _, p := range pointsOf(m.Data) {
						if v, ok := p.attrs.Value(semconv.ServerAddressKey); ok {
							hosts[v.AsString()] = true
						}
						if m.Name == "idem.client.attempts" {
							attempts++
						}
					}
				}
			}
			if tc.drop {
				assert.Empty(t, hosts, "hosts in the client's metrics")
				assert.Equal(t, 1, attempts, "series of idem.client.attempts")
			} else {
				assert.Len(t, hosts, 100, "hosts in the client's metrics")
				assert.Equal(t, 100, attempts, "series of idem.client.attempts")
			}
		})
	}
}
