// Command server runs the payments API of the idem example (package
// examples/payments/api) on its own:
//
//	go run ./examples/payments/server                                  # in memory
//	go run ./examples/payments/server -db 'postgres://localhost/test'  # survives crashes
//	go run ./examples/payments/server -mysql 'root@tcp(127.0.0.1:3306)/test'  # on MySQL or MariaDB
//
// Flags:
//
//	-addr       listen address (default 127.0.0.1:8080)
//	-db         Postgres URL; empty (the default) keeps everything in memory
//	-mysql      a MySQL or MariaDB DSN instead of -db: the payments in an
//	            api.MySQLBackend, their records in a mysqlidem.Store on the
//	            same pool (no -notify there: the outbox is on Postgres)
//	-retention  how long stored responses answer retries (default 24h)
//	-lease      the lease of a POST /v1/charges attempt (default 30s)
//	-gateway    base URL of the card gateway; empty starts one in this
//	            process (its charges die with it: run
//	            go run ./examples/payments/gateway and pass its URL to keep
//	            them across crashes)
//	-grace      how long a shutdown waits for the requests in flight (default 10s)
//	-notify     base URL of a receiver (go run ./examples/payments/receiver):
//	            each payment enqueues a payment.created notification in its
//	            transaction, which this process delivers (see notify.go)
//	-reconcile  run a reconciler every so often (e.g. 10s; default 0: none)
//	-reconcile-max-age
//	            how long a charge may stay unknown before the reconciler
//	            leaves it uncertain for an operator (default 1h; under -retention)
//	-read-timeout  how long a client may take to send a whole request,
//	            header and body (default 15s): a slow or stalled body is cut
//	            off (400 request-unreadable, then the connection closes)
//	-idle-timeout  how long a kept-alive connection may wait for its next
//	            request (default 60s)
//	-require-durable
//	            refuse to start unless the database's durability report
//	            (server.CheckDurability) is clean: no setting lets a crash
//	            or a failover lose a payment already answered
//	-admin-token
//	            serve the operators' pages behind HTTP Basic authentication
//	            whose password is this token: idem's admin page at /admin/
//	            (package admin) and, on Postgres, River UI at /riverui/
//	            (see admin.go and docs/operations.md)
//	-admin-write
//	            let /admin/ evict records and re-drive parked messages
//
// Metrics for Prometheus (/metrics) are served by the telemetry module's
// build of this API, which this module cannot hold without depending on
// OpenTelemetry: cd otelidem && go run ./example/server -metrics
// 127.0.0.1:9464 (see the examples README's Metrics section).
//
// A request's header must arrive within 10s. A response must be written
// within -read-timeout + -lease + 30s of the end of the header: the longest
// handler, a charge, calls the gateway for at most the lease; a client that
// does not read its response is cut off after that (it retries, and gets
// the stored response).
//
// It applies the schema on start (api.Migrate), logs the database's
// durability report (server.CheckDurability: one line per setting, a
// warning for each risk), sweeps expired idempotency records, logs with
// slog to stderr, and prints
//
//	payments server: listening on http://127.0.0.1:8080
//
// to stdout once it accepts connections. SIGINT or SIGTERM shuts it down
// gracefully: it stops accepting, and the requests in flight finish. On
// Postgres it loses nothing to SIGKILL either: a restarted server answers
// the retries of finished operations with their stored responses.
//
// # Reconciler
//
// With -reconcile, the process also runs server.RunReconciler over the
// API's api.ReconcileRoutes: a POST /v1/charges whose node died or stalled
// and whose client never came back is taken over once its lease (-lease)
// has ended, looked up at the gateway, and settled within about one lease
// and one interval: the charge made is recorded and its 201 stored for
// every later retry to replay, or the record is freed when the gateway
// never charged, or, still unknown at -reconcile-max-age, it is settled as
// result-unavailable. Run it on every node: each abandoned charge is
// settled by one of them. It stops with the server, after storing what its
// lookups in flight answered.
//
// Try it:
//
//	curl -X PUT localhost:8080/v1/accounts/acc-1 -H 'Authorization: Bearer acme:alice' -d '{"balance_cents":10000}'
//	curl -X POST localhost:8080/v1/payments -H 'Authorization: Bearer acme:alice' \
//	     -H 'Idempotency-Key: 6b0f...' -d '{"account_id":"acc-1","amount_cents":2500,"currency":"EUR"}'
//
// # Crash switch (a test switch)
//
// For crash tests, the environment can make the process kill itself with
// SIGKILL at an exact point of a request, the way a power cut would:
//
//	IDEM_CRASH_AT     claimed | handled | committed (the steps of the
//	                  idempotency middleware, see server.Hooks), or
//	                  gateway-called | gateway-answered | recorded (the
//	                  steps of POST /v1/charges, see api.Config.OnStep), or
//	                  reconciling | reconciled (the reconciler took a charge
//	                  over; its lookup answered and a charge it found is
//	                  recorded, the settlement is not stored yet)
//	IDEM_CRASH_ROUTE  only requests to this route, e.g. "POST /v1/payments"
//	                  (default: any route); the steps of POST /v1/charges
//	                  and of the reconciler take no other route (exit 2)
//	IDEM_CRASH_AFTER  crash the n-th time the point is reached (default 1)
//	IDEM_CRASH_ACTION kill (the default) or pause: the request that reaches
//	                  the point waits there, as one stalled by a long GC
//	                  pause or a slow disk would, until the process gets
//	                  SIGUSR1, and then goes on (Unix only)
//
// "committed" is the interesting one: the outcome is durable, the client
// has not heard of it.
//
//	IDEM_TRACE_FILE   append each step of a record's lifecycle that the
//	                  stores perform to this file, for the tests that check
//	                  a run against the lifecycle's model (internal/trace)
//
// Never set these in production.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/examples/payments/internal/httpserve"
	"github.com/idemkit/idem/examples/payments/internal/mysqlopen"
	"github.com/idemkit/idem/internal/dbflag"
	"github.com/idemkit/idem/internal/exampleserver"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/mysqlidem"
	"github.com/idemkit/idem/server"
)

func main() { exampleserver.Main("payments server", run) }

// errUsage: the flags or the environment are wrong (already reported).
var errUsage = exampleserver.ErrUsage

// options are the program's flags.
type options struct {
	addr, db, gateway, notify  string
	mysql                      string // replaces db
	retention, lease           time.Duration
	grace                      time.Duration
	readTimeout, idleTimeout   time.Duration
	reconcile, reconcileMaxAge time.Duration
	requireDurable             bool
	adminToken                 string
	adminWrite                 bool
}

func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen `address`")
	dbflag.Var(fs, &o.db, getenv, dbflag.Memory)
	fs.DurationVar(&o.retention, "retention", 24*time.Hour, "how long stored responses answer retries")
	fs.DurationVar(&o.lease, "lease", 30*time.Second, "the lease of a POST /v1/charges attempt")
	fs.StringVar(&o.gateway, "gateway", "", "card gateway base `URL`; empty starts one in this process")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "how long a shutdown waits for the requests in flight")
	fs.DurationVar(&o.readTimeout, "read-timeout", 15*time.Second, "how long a client may take to send a whole request")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 60*time.Second, "how long a kept-alive connection may wait for its next request")
	fs.DurationVar(&o.reconcile, "reconcile", 0, "run a reconciler at this `interval` (0: none)")
	fs.DurationVar(&o.reconcileMaxAge, "reconcile-max-age", time.Hour,
		"how long a charge may stay unknown before the reconciler leaves it uncertain for an operator")
	fs.StringVar(&o.notify, "notify", "", "receiver base `URL`: payments notify it through the outbox")
	fs.BoolVar(&o.requireDurable, "require-durable", false, "refuse to start unless the database's durability report is clean")
	fs.StringVar(&o.adminToken, "admin-token", "", "serve the operators' pages (/admin/, and /riverui/ on Postgres) to HTTP Basic auth with this `password`")
	fs.BoolVar(&o.adminWrite, "admin-write", false, "let /admin/ evict records and re-drive messages")
	fs.StringVar(&o.mysql, "mysql", "", "MySQL or MariaDB `DSN` (user:pass@tcp(host:3306)/db) of the payments and their records, instead of -db")
	if err := exampleserver.Parse(fs, args); err != nil {
		return o, err
	}
	dbSet := false // -db given on the command line, and not empty
	fs.Visit(func(f *flag.Flag) { dbSet = dbSet || f.Name == "db" && o.db != "" })
	if o.mysql != "" {
		o.db = "" // $DATABASE_URL's default gives way
	}
	switch {
	case o.mysql != "" && (dbSet || o.notify != ""):
		fmt.Fprintln(stderr, "server: -mysql takes neither -db (two databases) nor -notify (the outbox is on Postgres)")
		return o, errUsage
	case fs.NArg() > 0 || o.retention <= 0 || o.lease <= 0 || o.grace <= 0 || o.readTimeout <= 0 || o.idleTimeout <= 0 || o.reconcile < 0:
		fmt.Fprintln(stderr, "server: no arguments are taken, the durations must be positive, and -reconcile not negative")
		return o, errUsage
	case o.adminWrite && o.adminToken == "":
		fmt.Fprintln(stderr, "server: -admin-write needs -admin-token: the operators' pages are served only behind it")
		return o, errUsage
	case o.requireDurable && o.db == "" && o.mysql == "":
		fmt.Fprintln(stderr, "server: -require-durable needs -db: in memory, a restart loses every payment and its record")
		return o, errUsage
	case o.reconcile > 0 && (o.reconcileMaxAge <= 0 || o.reconcileMaxAge >= o.retention):
		fmt.Fprintln(stderr, "server: -reconcile-max-age must be positive and under -retention: a record swept before it is settled takes its evidence with it")
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
	crash, err := crashSwitchFromEnv(getenv, log)
	if err != nil {
		fmt.Fprintln(stderr, "server:", err)
		return errUsage
	}
	if err := trace.FromEnv(getenv); err != nil {
		fmt.Fprintln(stderr, "server:", err)
		return errUsage
	}
	// Bind first: a port that is taken fails the program before anything
	// else starts (and logs its shutdown).
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	defer ln.Close() // when a step below fails; serving closes it otherwise
	cfg := api.Config{Retention: o.retention, Lease: o.lease, GatewayURL: o.gateway,
		Hooks: crash.hooks(), OnStep: crash.onStep, Logger: log}
	closeDB, err := openBackend(ctx, o, &cfg)
	if err != nil {
		return err
	}
	defer closeDB()
	ob, stopNotify, err := startNotify(ctx, o, &cfg, log)
	if err != nil {
		return err
	}
	defer stopNotify()
	go func() { _ = server.RunSweeper(ctx, cfg.Store, server.SweepConfig{Logger: log}) }()

	if cfg.GatewayURL == "" {
		url, stopGateway, err := startGateway(ctx, o.grace, log)
		if err != nil {
			return err
		}
		defer stopGateway() // after the API's requests in flight finished
		cfg.GatewayURL = url
	}
	stopReconciler, err := startReconciler(ctx, o, cfg, crash, log)
	if err != nil {
		return err
	}
	defer stopReconciler() // before the gateway stops and the pool closes
	h, stopAdmin, err := withAdmin(ctx, o, api.New(cfg), cfg.Store, ob, log)
	if err != nil {
		return err
	}
	defer stopAdmin()
	fmt.Fprintf(stdout, "payments server: listening on http://%s\n", ln.Addr())
	log.Info("payments server started", "addr", ln.Addr().String(), "store", storeName(o),
		"gateway", cfg.GatewayURL, "retention", o.retention, "lease", o.lease, "admin", o.adminToken != "")
	return httpserve.Run(ctx, ln, h, o.grace, o.timeouts(), log)
}

// timeouts are the API's bounds on a client (see the package doc): the
// write timeout covers the body, the longest handler (a charge, whose
// gateway call the lease bounds) and a margin for the database.
func (o options) timeouts() httpserve.Timeouts {
	return httpserve.Timeouts{Read: o.readTimeout, Write: o.readTimeout + o.lease + 30*time.Second, Idle: o.idleTimeout}
}

// openBackend sets cfg's Backend and Store from -mysql, or -db (see
// api.OpenBackend), after the database's durability report.
func openBackend(ctx context.Context, o options, cfg *api.Config) (closeDB func(), err error) {
	if o.mysql == "" {
		return api.OpenBackend(ctx, o.db, cfg, func(ctx context.Context, pool *pgxpool.Pool) error {
			d, err := server.CheckDurability(ctx, pool)
			return reportDurability(ctx, d, err, o.requireDurable, cfg.Logger)
		})
	}
	db, store, err := mysqlopen.Open(ctx, o.mysql, 0)
	if err != nil {
		return nil, err
	}
	d, err := mysqlidem.CheckDurability(ctx, db)
	if err := reportDurability(ctx, d, err, o.requireDurable, cfg.Logger); err != nil {
		_ = db.Close()
		return nil, err
	}
	cfg.Backend, cfg.Store = api.NewMySQLBackend(db), store
	return func() { _ = db.Close() }, nil
}

// reportDurability logs the database's durability report d (err: it could
// not be read), one line per setting, a warning for each risk; with
// requireClean, a report that is not clean (or cannot be read) is an error.
func reportDurability(ctx context.Context, d server.Durability, err error, requireClean bool, log *slog.Logger) error {
	switch {
	case err != nil && requireClean:
		return fmt.Errorf("-require-durable: %w", err)
	case err != nil:
		log.Warn("durability report unavailable", "err", err)
		return nil
	}
	for _, f := range d.Findings {
		level := slog.LevelInfo
		if f.Risk {
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "durability", "setting", f.Name, "value", f.Value, "risk", f.Risk, "meaning", f.Meaning)
	}
	if requireClean && !d.Clean() {
		return fmt.Errorf("-require-durable: the database's durability report is not clean (start without the flag to run anyway):\n%s", d)
	}
	return nil
}

func storeName(o options) string {
	switch {
	case o.mysql != "":
		return "mysql"
	case o.db == "":
		return "memory"
	}
	return "postgres"
}

// startGateway serves an in-process card gateway on a free loopback port.
// stop shuts it down and waits for it.
func startGateway(ctx context.Context, grace time.Duration, log *slog.Logger) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("in-process gateway: %w", err)
	}
	url, stop = serveGateway(ctx, ln, grace, log)
	return url, stop, nil
}

// serveGateway serves the in-process gateway on ln until stop, which
// waits for it. ctx's values reach it, not its end: the gateway outlives
// the API's requests in flight. Its failure is logged: the charges then
// fail with 502 gateway-unavailable.
func serveGateway(ctx context.Context, ln net.Listener, grace time.Duration, log *slog.Logger) (url string, stop func()) {
	gwCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	gwLog := log.With("component", "gateway")
	go func() {
		defer close(done)
		if err := httpserve.Run(gwCtx, ln, api.NewGateway(api.GatewayConfig{Logger: gwLog}), grace, httpserve.Timeouts{}, gwLog); err != nil {
			gwLog.Error("in-process gateway failed", "err", err)
		}
	}()
	return "http://" + ln.Addr().String(), func() { cancel(); <-done }
}
