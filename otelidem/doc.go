// Package otelidem turns the events of idem's client, server middleware,
// reconciler, sweeper and outbox into OpenTelemetry spans and metrics. It
// is a module of its own (github.com/idemkit/idem/otelidem), so that users
// of idem who do not want OpenTelemetry do not get its dependencies. It
// uses OpenTelemetry's API only: the application installs the SDK and its
// exporters (Prometheus, OTLP, ...), or passes providers in [Config].
//
// It has three types, one per side, each built from a Config and handing
// out the hooks to install:
//
//   - [Client]: [idem.Config.Observer] = client.Observer(). A span per
//     attempt on the wire, and the client's counters: attempts by
//     outcome, retries by reason, the waits before them, budget denials,
//     breaker transitions and open breakers per host, calls ending in
//     each kind of error.
//   - [Server]: [server.Config.Hooks] = srv.Hooks(), and
//     [server.ReconcileConfig.Hooks], [server.SweepConfig.OnSweep],
//     srv.ObserveStore(store): requests by verdict, claim and commit
//     times, waits on a running duplicate, takeovers, tombstones, swept
//     records, settlements, and the operations in flight as gauges; child
//     spans of the request's span for the claim and the commit.
//   - [Outbox]: [outbox.Config.Observer] = ob.Observer(), and
//     ob.ObserveStats(outbox): deliveries by outcome, the depth, the age of
//     the oldest pending message and the parked messages.
//
// docs/telemetry.md lists every instrument, its unit and its
// attributes. Attributes stay low-cardinality: hosts, route patterns,
// methods, statuses, outcomes; never a key, a tenant, a principal or a
// path with IDs in it (a request that no pattern routed, with the
// middleware around the mux, gets no http.route). A host is still a
// series of each client instrument: a client that sends to many hosts,
// such as an outbox dispatcher to webhooks, drops server.address and
// server.port with an SDK view (the outbox package doc, "Telemetry of
// many destinations", has it).
//
// # Wrapping order on the client
//
// idem outside otelhttp: give idem an otelhttp transport as its Base.
//
//	tel, _ := otelidem.NewClient(otelidem.Config{})
//	client := idem.NewClient(idem.Config{
//		Base:     otelhttp.NewTransport(http.DefaultTransport.(*http.Transport).Clone()),
//		Observer: tel.Observer(),
//	})
//
// A call then shows, under the caller's span, one idem.attempt span per
// attempt (http.request.resend_count, idem.retry.reason, idem.retry.wait,
// idem.certainty, ...), each the parent of otelhttp's HTTP client span,
// which puts that attempt's trace context on the wire: the server's span
// of each attempt hangs under it. The other order, otelhttp outside idem,
// makes one HTTP client span for the whole call, waits included, and puts
// its trace context on every attempt. With no HTTP instrumentation at all,
// the attempt spans are still made, and no trace context is sent.
//
// idem learns whether an attempt was sent from net/http's connection
// trace, which otelhttp passes through (it derives the request's context):
// see [idem.Config.Base] for what a Base must preserve.
package otelidem
