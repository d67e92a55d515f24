package otelidem

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
