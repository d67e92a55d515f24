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
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/dbflag"
	"github.com/idemkit/idem/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv); {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "payments server:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errUsage
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
	closeDB, err := openBackend(ctx, o.db, &cfg)
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
	gateway, err := serve(ctx, "127.0.0.1:0", api.NewGateway(api.GatewayConfig{Logger: log}), o.grace)
	if err != nil {
		return fmt.Errorf("in-process gateway: %w", err)
	}
	defer gateway.stop()
	cfg.GatewayURL = "http://" + gateway.addr
	if o.metrics != "" {
		m, err := serve(ctx, o.metrics, tel.handler(), o.grace)
		if err != nil {
			return fmt.Errorf("-metrics: %w", err)
		}
		defer m.stop()
		fmt.Fprintf(stdout, "payments server: metrics on http://%s/metrics\n", m.addr)
	}
	srv, err := serve(ctx, o.addr, api.New(cfg), o.grace)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "payments server: listening on http://%s\n", srv.addr)
	<-ctx.Done()
	srv.stop()
	return srv.err
}

// openBackend sets cfg's Backend and Store: Postgres at url (after
// applying the schema), or memory when url is empty. closeDB closes the
// pool.
func openBackend(ctx context.Context, url string, cfg *api.Config) (closeDB func(), err error) {
	if url == "" {
		cfg.Backend, cfg.Store = api.NewMemoryBackend(), server.NewMemoryStore()
		return func() {}, nil
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("-db: %w", err)
	}
	if err := api.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	cfg.Backend, cfg.Store = api.NewPostgresBackend(pool), server.NewPostgresStore(pool)
	return pool.Close, nil
}

// served is an HTTP server running on addr.
type served struct {
	addr string
	stop func() // shuts it down gracefully and waits for it
	err  error  // why it stopped, after stop; nil after a shutdown
}

// serve serves h on addr until stop (or ctx's end, then stop waits up to
// grace for the requests in flight).
func serve(ctx context.Context, addr string, h http.Handler, grace time.Duration) (*served, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 15 * time.Second,
		IdleTimeout: 60 * time.Second, BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	s := &served{addr: ln.Addr().String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	s.stop = func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		_ = hs.Shutdown(sctx)
		<-done
	}
	return s, nil
}
