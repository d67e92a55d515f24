// Package guide is the code that docs/telemetry.md shows, so that
// internal/docs's TestReadmeSnippetsAreCompiled can hold the guide to code
// that this module compiles.
package guide

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/otelidem"
	"github.com/idemkit/idem/server"
)

// Telemetry is docs/telemetry.md's outline: the client's observer, the
// middleware's hooks, the store's gauges, the sweeper's and the outbox's
// instruments. It returns what the service goes on to use.
func Telemetry(ctx context.Context, store *server.PostgresStore) (*http.Client, func(http.Handler) http.Handler, *otelidem.Outbox) {
	tel, _ := otelidem.NewClient(otelidem.Config{}) // the global providers; or TracerProvider, MeterProvider
	client := idem.NewClient(idem.Config{
		Base:     otelhttp.NewTransport(http.DefaultTransport.(*http.Transport).Clone()), // idem outside otelhttp
		Observer: tel.Observer(),
	})
	srv, _ := otelidem.NewServer(otelidem.Config{})
	mw := server.Middleware(store, server.Config{Hooks: srv.Hooks()})          // mounted under otelhttp.NewHandler
	_, _ = srv.ObserveStore(store)                                             // the in-flight gauges
	go server.RunSweeper(ctx, store, server.SweepConfig{OnSweep: srv.OnSweep}) // and ReconcileConfig{Hooks: srv.ReconcileHooks()}
	ob, _ := otelidem.NewOutbox(otelidem.Config{})                             // outbox.Config{Observer: ob.Observer()}; ob.ObserveStats(q)
	return client, mw, ob
}
