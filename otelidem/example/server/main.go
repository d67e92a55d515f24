// Command server runs the payments API of the idem example
// (examples/payments/api) with its telemetry: OpenTelemetry metrics of
// the idempotency middleware, the sweeper, the store, and the idem client
// that calls the card gateway, served for Prometheus at /metrics:
//
//	cd otelidem && go run ./example/server -metrics 127.0.0.1:9464
//	curl -s 127.0.0.1:9464/metrics | grep ^idem_
//
// It is examples/payments/server's API with a -metrics flag. It lives in
// the otelidem module, not beside examples/payments/server, so that the
// idem module itself needs no OpenTelemetry: that program cannot import
// it. It has that program's main flags, not its crash switch, reconciler
// or notifications:
//
//	-addr     listen address of the API (default 127.0.0.1:8080)
//	-metrics  listen address of /metrics (default none: no metrics served)
//	-db       Postgres URL; empty (the default) keeps everything in memory
//	-grace    how long a shutdown waits for the requests in flight (10s)
//
// The card gateway runs in this process. The metrics go through
// OpenTelemetry's Prometheus exporter (go.opentelemetry.io/otel/exporters/
// prometheus), which registers with a client_golang registry that
// promhttp serves: the library records with OpenTelemetry's API, and the
// exporter turns its names into Prometheus's (idem.server.requests, unit
// {request}: idem_server_requests_total; idem.server.claim.duration, unit
// s: idem_server_claim_duration_seconds). It prints
//
//	payments server: metrics on http://127.0.0.1:9464/metrics
//	payments server: listening on http://127.0.0.1:8080
//
// to stdout once it accepts connections; SIGINT or SIGTERM shuts it down.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/dbflag"
	"github.com/idemkit/idem/internal/exampleserver"
	"github.com/idemkit/idem/server"
)

func main() { exampleserver.Main("payments server", run) }

// errUsage: the flags or the environment are wrong (already reported).
var errUsage = exampleserver.ErrUsage

type options struct {
	addr, metrics, db string
	grace             time.Duration
}

func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen `address` of the API")
	fs.StringVar(&o.metrics, "metrics", "", "listen `address` of /metrics; empty serves no metrics")
	dbflag.Var(fs, &o.db, getenv, dbflag.Memory)
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "how long a shutdown waits for the requests in flight")
	if err := exampleserver.Parse(fs, args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 || o.grace <= 0 {
		fmt.Fprintln(stderr, "server: no arguments are taken, and -grace must be positive")
		return o, errUsage
	}
	return o, nil
}

// run is the program: it returns when ctx is done (after a graceful
// shutdown) or when serving fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	o, err := parseFlags(args, stderr, getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	tel, err := newTelemetry()
	if err != nil {
		return err
	}
	defer tel.shutdown()
	cfg := api.Config{Hooks: tel.server.Hooks(), Logger: log,
		GatewayClient: idem.NewClient(idem.Config{AttemptTimeout: 2 * time.Second, Observer: tel.client.Observer()})}
	closeDB, err := api.OpenBackend(ctx, o.db, &cfg, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	if _, err := tel.server.ObserveStore(cfg.Store); err != nil {
		return err
	}
	go func() {
		_ = server.RunSweeper(ctx, cfg.Store, server.SweepConfig{Logger: log, OnSweep: tel.server.OnSweep})
	}()
	gateway, err := exampleserver.Serve(ctx, "127.0.0.1:0", api.NewGateway(api.GatewayConfig{Logger: log}), o.grace)
	if err != nil {
		return fmt.Errorf("in-process gateway: %w", err)
	}
	defer gateway.Stop()
	cfg.GatewayURL = "http://" + gateway.Addr
	if o.metrics != "" {
		m, err := exampleserver.Serve(ctx, o.metrics, tel.handler(), o.grace)
		if err != nil {
			return fmt.Errorf("-metrics: %w", err)
		}
		defer m.Stop()
		fmt.Fprintf(stdout, "payments server: metrics on http://%s/metrics\n", m.Addr)
	}
	srv, err := exampleserver.Serve(ctx, o.addr, api.New(cfg), o.grace)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "payments server: listening on http://%s\n", srv.Addr)
	<-ctx.Done()
	srv.Stop()
	return srv.Err
}
