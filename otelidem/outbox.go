package otelidem

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/idemkit/idem/outbox"
)

// Outbox turns an outbox's delivery outcomes into measurements, and its
// depth into gauges. The attempts of each delivery are the idem client's:
// set a [Client]'s Observer as the outbox's outbox.Config.Client.Observer to
// see them. It is safe for concurrent use.
type Outbox struct {
	meter      metric.Meter
	deliveries metric.Int64Counter
	sets       sets[deliveryKey]
}

// NewOutbox returns an [Outbox] that reports to cfg's providers (its
// TracerProvider is not used). It fails only when the meter refuses an
// instrument.
func NewOutbox(cfg Config) (*Outbox, error) {
	in := &instruments{m: cfg.meter()}
	o := &Outbox{meter: in.m,
		deliveries: in.counter("idem.outbox.deliveries", "{delivery}", "Deliveries of messages, by outcome: delivered, retried (delivered again later) or parked.")}
	if in.err != nil {
		return nil, in.err
	}
	return o, nil
}

// Observer returns the hooks to set as [outbox.Config.Observer].
func (o *Outbox) Observer() outbox.Observer {
	return outbox.Observer{
		Delivered: func(ctx context.Context, d outbox.Delivery) { o.count(ctx, d, "delivered") },
		Retried:   func(ctx context.Context, d outbox.Delivery, _ time.Duration) { o.count(ctx, d, "retried") },
		Parked:    func(ctx context.Context, d outbox.Delivery) { o.count(ctx, d, "parked") },
	}
}

func (o *Outbox) count(ctx context.Context, d outbox.Delivery, outcome string) {
	k := deliveryKey{name: d.Name, outcome: outcome, status: d.Status, reason: string(d.Reason)}
	o.deliveries.Add(ctx, 1, o.sets.get(k, deliveryKey.attrs))
}

// deliveryKey is the attribute values of a delivery's outcome.
type deliveryKey struct {
	name, outcome string
	status        int
	reason        string
}

func (k deliveryKey) attrs() []attribute.KeyValue {
	kv := []attribute.KeyValue{keyMessageName.String(k.name), keyDelivery.String(k.outcome)}
	if k.status != 0 {
		kv = append(kv, semconv.HTTPResponseStatusCode(k.status))
	}
	if k.reason != "" {
		kv = append(kv, keyParkReason.String(k.reason))
	}
	return kv
}

// ObserveStats reports an outbox's depth ([outbox.Stats]) as three gauges,
// idem.outbox.pending, idem.outbox.pending.oldest_age and
// idem.outbox.parked, asking src.Stats at each collection; a failed query
// reports nothing. *[outbox.Outbox] and *[outbox.Memory] satisfy src. With
// several dispatcher processes on one database, observe it from one of
// them: each would report the same depth.
func (o *Outbox) ObserveStats(src interface {
	Stats(context.Context) (outbox.Stats, error)
}) (metric.Registration, error) {
	in := &instruments{m: o.meter}
	pending := in.gauge("idem.outbox.pending", "{message}", "Messages neither delivered nor parked.")
	age := in.age("idem.outbox.pending.oldest_age", "Time since the oldest pending message was enqueued.")
	parked := in.gauge("idem.outbox.parked", "{message}", "Messages parked, until re-driven.")
	if in.err != nil {
		return nil, in.err
	}
	return o.meter.RegisterCallback(func(ctx context.Context, ob metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, statsTimeout)
		defer cancel()
		st, err := src.Stats(ctx)
		if err != nil {
			return err
		}
		ob.ObserveInt64(pending, int64(st.Pending))
		ob.ObserveFloat64(age, st.OldestPending.Seconds())
		ob.ObserveInt64(parked, int64(st.Parked))
		return nil
	}, pending, age, parked)
}
