// Command server runs the payments API of the idem example
// (examples/payments/api) with its card charges, POST /v1/charges (a
// Leased route: the gateway's charge leaves the database), kept on Redis
// by a flag:
//
//	cd idemredis && go run ./example/server -redis 127.0.0.1:6379
//	cd idemredis && go run ./example/server -redis 127.0.0.1:6379 -db 'postgres://localhost/test'
//
// It is examples/payments/server's API with a -redis flag. It lives in
// the idemredis module, not beside examples/payments/server, so that the
// idem module itself needs no go-redis: that program cannot import it.
// It has that program's main flags, not its crash switch or
// notifications:
//
//	-addr             listen address of the API (default 127.0.0.1:8080)
//	-db               Postgres URL of the accounts, payments and charges;
//	                  empty (the default) keeps them in memory
//	-redis            Redis address(es), comma-separated (several: a
//	                  Cluster): the records of POST /v1/charges go there
//	                  (idemredis.Store); empty keeps them with the payments'
//	-redis-prefix     the store's key prefix (default "idem")
//	-replicas         WAIT for this many Redis replicas before a claim,
//	                  completion or replay counts
//	                  (idemredis.Config.Replicas; default 0)
//	-lease            the lease of a POST /v1/charges attempt (default 30s)
//	-gateway          base URL of the card gateway; empty starts one in
//	                  this process
//	-gateway-timeout  0 (the default): the gateway client is idem's, which
//	                  retries; above 0, a plain client makes one attempt of
//	                  at most this, and a failed call ends the lease (502)
//	-reconcile        run a reconciler over the charges' store at this
//	                  interval (default 0: none)
//	-grace            how long a shutdown waits for the requests in flight
//
// It prints
//
//	payments server: listening on http://127.0.0.1:8080
//
// to stdout once it accepts connections; SIGINT or SIGTERM shuts it down.
// A test switch, never to set in production: IDEM_TRACE_FILE appends each
// step of a record's lifecycle that the stores perform to that file
// (internal/trace).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/idemredis"
	"github.com/idemkit/idem/internal/dbflag"
	"github.com/idemkit/idem/internal/exampleserver"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

func main() { exampleserver.Main("payments server", run) }

// errUsage: the flags or the environment are wrong (already reported).
var errUsage = exampleserver.ErrUsage

type options struct {
	addr, db, redis, prefix, gateway string
	replicas                         int
	lease, gatewayTimeout, reconcile time.Duration
	grace                            time.Duration
}

func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen `address` of the API")
	dbflag.Var(fs, &o.db, getenv, dbflag.Memory)
	fs.StringVar(&o.redis, "redis", "", "Redis `addresses`, comma-separated, for the records of POST /v1/charges")
	fs.StringVar(&o.prefix, "redis-prefix", "", "the Redis store's key `prefix` (empty: idem)")
	fs.IntVar(&o.replicas, "replicas", 0, "WAIT for this many Redis replicas before a claim, completion or replay counts")
	fs.DurationVar(&o.lease, "lease", 30*time.Second, "the lease of a POST /v1/charges attempt")
	fs.StringVar(&o.gateway, "gateway", "", "card gateway base `URL`; empty starts one in this process")
	fs.DurationVar(&o.gatewayTimeout, "gateway-timeout", 0, "above 0: a plain gateway client making one attempt of at most this")
	fs.DurationVar(&o.reconcile, "reconcile", 0, "run a reconciler at this `interval` (0: none)")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "how long a shutdown waits for the requests in flight")
	if err := exampleserver.Parse(fs, args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 || o.lease <= 0 || o.grace <= 0 || o.gatewayTimeout < 0 || o.reconcile < 0 || o.replicas < 0 {
		fmt.Fprintln(stderr, "server: no arguments are taken; -lease and -grace must be positive, the others not negative")
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
	if err := trace.FromEnv(getenv); err != nil {
		fmt.Fprintln(stderr, "server:", err)
		return exampleserver.ErrUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg := api.Config{Lease: o.lease, GatewayURL: o.gateway, Logger: log}
	if o.gatewayTimeout > 0 {
		cfg.GatewayClient = &http.Client{Timeout: o.gatewayTimeout}
	}
	closeDB, err := api.OpenBackend(ctx, o.db, &cfg, nil)
	if err != nil {
		return err
	}
	defer closeDB()
	closeRedis, err := openRedis(ctx, o, &cfg)
	if err != nil {
		return err
	}
	defer closeRedis()
	go func() { _ = server.RunSweeper(ctx, cfg.Store, server.SweepConfig{Logger: log}) }()
	if cfg.GatewayURL == "" {
		gw, err := exampleserver.Serve(ctx, "127.0.0.1:0", api.NewGateway(api.GatewayConfig{Logger: log}), o.grace)
		if err != nil {
			return fmt.Errorf("in-process gateway: %w", err)
		}
		defer gw.Stop()
		cfg.GatewayURL = "http://" + gw.Addr
	}
	if o.reconcile > 0 {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = server.RunReconciler(rctx, cfg.ChargesStore, server.ReconcileConfig{Routes: api.ReconcileRoutes(cfg),
				Interval: o.reconcile, Lease: o.lease, Logger: log})
		}()
		defer func() { cancel(); <-done }()
	}
	srv, err := exampleserver.Serve(ctx, o.addr, api.New(cfg), o.grace)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "payments server: listening on http://%s\n", srv.Addr)
	log.Info("payments server started", "addr", srv.Addr, "charges", chargesStore(o))
	<-ctx.Done()
	srv.Stop()
	return srv.Err
}

func chargesStore(o options) string {
	if o.redis == "" {
		return "the payments' store"
	}
	return "redis " + o.redis
}

// openRedis sets cfg.ChargesStore: an [idemredis.Store] at -redis, or the
// payments' store when -redis is empty.
func openRedis(ctx context.Context, o options, cfg *api.Config) (func(), error) {
	if o.redis == "" {
		cfg.ChargesStore = cfg.Store
		return func() {}, nil
	}
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: strings.Split(o.redis, ",")})
	store, err := idemredis.New(ctx, rdb, idemredis.Config{Prefix: o.prefix, Replicas: o.replicas})
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("-redis: %w", err)
	}
	cfg.ChargesStore = store
	return func() { _ = rdb.Close() }, nil
}
