package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/server"
)

// startReconciler runs the reconciler of the API's Leased routes
// (api.ReconcileRoutes) on cfg.Store beside the HTTP server, every
// o.reconcile, until ctx is done or stop is called; with o.reconcile zero
// it does nothing. Its lease on an operation is o.lease, as a request's.
// stop ends it and waits until it has stored the answers of the lookups it
// cancelled, so call it before the pool closes.
func startReconciler(ctx context.Context, o options, cfg api.Config, crash *crashSwitch, log *slog.Logger) (stop func(), err error) {
	if o.reconcile <= 0 {
		return func() {}, nil
	}
	routes := api.ReconcileRoutes(cfg)
	if len(routes) == 0 {
		return nil, errors.New("-reconcile: the API has no route to reconcile")
	}
	for route, f := range routes {
		routes[route] = crash.reconcileFunc(f)
	}
	rc := server.ReconcileConfig{Routes: routes, Interval: o.reconcile, Lease: o.lease, MaxAge: o.reconcileMaxAge,
		Logger: log, Hooks: crash.reconcileHooks()}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := server.RunReconciler(ctx, cfg.Store, rc); !errors.Is(err, context.Canceled) {
			log.Error("reconciler stopped", "err", err)
		}
	}()
	log.Info("reconciler started", "interval", o.reconcile, "lease", o.lease, "max_age", o.reconcileMaxAge)
	return func() { cancel(); <-done }, nil
}
