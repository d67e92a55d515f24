package otelidem

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/idemkit/idem/server"
)

// ReconcileHooks returns the hooks to set as [server.ReconcileConfig.Hooks]:
// takeovers by the reconciler, its settlements by answer, and the
// operations it parks as result-unavailable (also counted as tombstones).
func (s *Server) ReconcileHooks() server.ReconcileHooks {
	return server.ReconcileHooks{
		TakenOver: func(ctx context.Context, e server.ReconcileEvent) {
			s.takeovers.Add(ctx, 1, s.source(reconciled(e), keyTakeoverBy, "reconciler"))
		},
		Settled: func(ctx context.Context, e server.ReconcileEvent) {
			s.settle(ctx, e, e.Answer.String())
		},
		Parked: func(ctx context.Context, e server.ReconcileEvent) {
			s.settle(ctx, e, "parked")
			s.tombstones.Add(ctx, 1, s.source(reconciled(e), keyTombstoneBy, "reconciler"))
		},
	}
}

// reconciled is a reconciler's event as the middleware's Event, for the
// route's attributes.
func reconciled(e server.ReconcileEvent) server.Event {
	return server.Event{Route: e.Route, Mode: server.Leased}
}

// settle counts a settlement: answer is the Answer's name, or "parked".
func (s *Server) settle(ctx context.Context, e server.ReconcileEvent, answer string) {
	kv := routeAttrs(routeOf(reconciled(e)), server.Leased, keyAnswer.String(answer))
	if e.Err != nil {
		kv = append(kv, semconv.ErrorType(e.Err))
	}
	s.settlements.Add(ctx, 1, metric.WithAttributes(kv...))
}

// OnSweep is the function to set as [server.SweepConfig.OnSweep]: it counts
// the records each sweep deleted, and the sweeps (a failed one with
// error.type).
func (s *Server) OnSweep(deleted int, err error) {
	ctx := context.Background()
	s.swept.Add(ctx, int64(deleted))
	if err != nil {
		s.sweeps.Add(ctx, 1, metric.WithAttributes(semconv.ErrorType(err)))
		return
	}
	s.sweeps.Add(ctx, 1)
}

// statsTimeout bounds a query of a gauge's callback: a collection must not
// hang on a database that does not answer.
const statsTimeout = 5 * time.Second

// ObserveStore reports the operations in flight in store and the age of
// the oldest ([server.StoreStats]) as two gauges, idem.server.inflight and
// idem.server.inflight.oldest_age, asking store.Stats at each collection
// (every scrape, or every export interval); a failed query reports
// nothing. Call it once per store; unregister the returned registration
// to stop. *[server.PostgresStore] and *[server.MemoryStore] satisfy store.
func (s *Server) ObserveStore(store interface {
	Stats(context.Context) (server.StoreStats, error)
}) (metric.Registration, error) {
	in := &instruments{m: s.meter}
	count := in.gauge("idem.server.inflight", "{operation}", "Operations claimed and not yet completed, released or settled, as the store sees them.")
	age := in.age("idem.server.inflight.oldest_age", "Age of the oldest operation in flight, by the store's clock.")
	if in.err != nil {
		return nil, in.err
	}
	return s.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, statsTimeout)
		defer cancel()
		st, err := store.Stats(ctx)
		if err != nil {
			return err
		}
		o.ObserveInt64(count, int64(st.Running))
		o.ObserveFloat64(age, st.OldestRunning.Seconds())
		return nil
	}, count, age)
}
