// Command reconcile measures the reconciler (server.RunReconciler): one
// pass over many abandoned Leased operations, with a reconcile function
// that answers from memory (Completed, a charge-sized 201), so that the
// figure is the reconciler's and the store's work, no provider's. It
// reports the operations settled per second, and the throughput of a live
// payment endpoint (examples/payments/api, POST /v1/payments on the same
// Postgres, loopback, concurrent clients) while the pass runs against
// while it does not, in the same run:
//
//	go run ./bench/reconcile -db "$DATABASE_URL"               # 100,000 operations
//	go run ./bench/reconcile -db "$DATABASE_URL" -ops 10000 -batch 64
//
// The run, in a schema of its own (dropped at the end): n abandoned
// operations (one real one cloned in SQL: see abandon), a pass with no
// load; n more, then the payment load, measured for -window before the
// pass, during a second pass, and for -window after it. The API and the
// reconciler share one pool (-conns), as they do in one node of the
// example's server program. Each pass is checked: every operation settled
// once, its record done.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/dbflag"
	"github.com/idemkit/idem/internal/proccpu"
	"github.com/idemkit/idem/server"
)

// config is the program's flags.
type config struct {
	db                  string
	ops, batch          int
	conns, clients      int
	reconcilerConns     int
	window, passTimeout time.Duration
}

func main() {
	var c config
	dbflag.Var(flag.CommandLine, &c.db, os.Getenv, dbflag.Required+" (a schema of its own is made and dropped)")
	flag.IntVar(&c.ops, "ops", 100_000, "abandoned operations per pass")
	flag.IntVar(&c.batch, "batch", 0, "ReconcileConfig.Batch (0: the default, 16)")
	flag.IntVar(&c.conns, "conns", 16, "the node's pool size, shared by the API and the reconciler")
	flag.IntVar(&c.clients, "clients", 16, "concurrent payment clients")
	flag.IntVar(&c.reconcilerConns, "reconciler-conns", 0, "a pool of this size for the reconciler alone, as on another node (0: it shares the API's)")
	flag.DurationVar(&c.window, "window", 10*time.Second, "how long the payments are measured before and after the pass")
	flag.DurationVar(&c.passTimeout, "pass-timeout", 10*time.Minute, "give up on a pass after this long")
	flag.Parse()
	if c.db == "" || c.ops <= 0 || c.conns <= 0 || c.clients <= 0 || c.window <= 0 || c.passTimeout <= 0 ||
		c.batch < 0 || c.reconcilerConns < 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "reconcile: -db (or DATABASE_URL) is required; -ops, -conns, -clients, -window and -pass-timeout"+
			" must be positive, -batch and -reconciler-conns not negative")
		os.Exit(2)
	}
	if err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "reconcile:", err)
		os.Exit(1)
	}
}

// run is the program; it writes its report to out.
func run(ctx context.Context, c config, out io.Writer) error {
	pool, drop, err := openSchema(ctx, c.db, c.conns)
	if err != nil {
		return err
	}
	defer drop()
	store, rstore := server.NewPostgresStore(pool), server.Store(nil)
	if c.reconcilerConns > 0 {
		cfg := pool.Config()
		cfg.MaxConns = int32(c.reconcilerConns)
		rpool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return err
		}
		defer rpool.Close()
		rstore = server.NewPostgresStore(rpool)
	}
	srv := httptest.NewServer(api.New(api.Config{Backend: api.NewPostgresBackend(pool), Store: store,
		Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	pools := fmt.Sprintf("one pool of %d", c.conns)
	if rstore != nil {
		pools = fmt.Sprintf("the API's pool of %d, the reconciler's of %d", c.conns, c.reconcilerConns)
	} else {
		rstore = store
	}
	fmt.Fprintf(out, "reconcile bench: %d abandoned operations per pass, batch %d, %s, %d payment clients\n",
		c.ops, orDefault(c.batch, 16), pools, c.clients)

	alone, err := seededPass(ctx, c, pool, rstore, "alone", nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pass alone:       %s\n", alone)

	l := startLoad(srv.URL, c.clients)
	defer l.stop()
	wait := func() error { time.Sleep(c.window); return nil }
	_, _, _ = l.rate(wait) // warm-up
	before, _, _ := l.rate(wait)
	fmt.Fprintf(out, "payments before:  %.0f req/s over %v\n", before, c.window)
	loaded, err := seededPass(ctx, c, pool, rstore, "loaded", l)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pass under load:  %s; payments during: %.0f req/s\n", loaded, loaded.payments)
	after, _, _ := l.rate(wait)
	fmt.Fprintf(out, "payments after:   %.0f req/s over %v\n", after, c.window)
	fmt.Fprintf(out, "payments during the pass / not: %.1f%% (of the mean of before and after)\n",
		100*loaded.payments/((before+after)/2))
	if f := l.fail.Load(); f > 0 {
		return fmt.Errorf("%d payments failed", f)
	}
	return nil
}

// passResult is one pass's figures.
type passResult struct {
	settled  int
	elapsed  time.Duration
	cpu      time.Duration // this process's: the reconciler's, and the API's under load
	seeding  time.Duration
	payments float64 // req/s during the pass, under load
}

func (p passResult) String() string {
	s := fmt.Sprintf("%d settled in %.2fs: %.0f ops/s (seeding %.1fs", p.settled,
		p.elapsed.Seconds(), float64(p.settled)/p.elapsed.Seconds(), p.seeding.Seconds())
	if p.payments == 0 { // the process's CPU is the reconciler's alone
		s += fmt.Sprintf("; this process's CPU %.1f µs/op", float64(p.cpu.Microseconds())/float64(p.settled))
	}
	return s + ")"
}

// seededPass abandons c.ops operations under prefix, then runs one pass
// over them, measuring l's payments meanwhile when l is not nil.
func seededPass(ctx context.Context, c config, pool *pgxpool.Pool, store server.Store, prefix string, l *load) (passResult, error) {
	start := time.Now()
	if err := abandon(ctx, pool, store, prefix, c.ops); err != nil {
		return passResult{}, err
	}
	res := passResult{seeding: time.Since(start)}
	cpu := proccpu.Used()
	pass := func() error {
		var err error
		res.elapsed, err = reconcilePass(ctx, c, store, answers(prefix, c.ops))
		return err
	}
	var err error
	if l != nil {
		res.payments, _, err = l.rate(pass)
	} else {
		err = pass()
	}
	res.cpu, res.settled = proccpu.Used()-cpu, c.ops
	if err == nil {
		err = checkSettled(ctx, pool, prefix, c.ops)
	}
	return res, err
}

// reconcilePass runs a reconciler until it has settled every operation of
// answers once, and returns how long that took.
func reconcilePass(ctx context.Context, c config, store server.Store, answers map[string]server.Settlement) (time.Duration, error) {
	var seen, failed atomic.Int64
	done := make(chan struct{})
	count := func(_ context.Context, e server.ReconcileEvent) {
		if e.Err != nil || e.Answer != server.Completed {
			failed.Add(1)
		}
		if seen.Add(1) == int64(len(answers)) {
			close(done)
		}
	}
	cfg := server.ReconcileConfig{Interval: time.Hour, Batch: c.batch, Logger: slog.New(slog.DiscardHandler),
		Hooks: server.ReconcileHooks{Settled: count, Parked: count},
		Routes: map[string]server.ReconcileFunc{route: func(_ context.Context, op *server.Abandoned) (server.Settlement, error) {
			if st, ok := answers[op.Key]; ok {
				return st, nil
			}
			return server.Settlement{}, fmt.Errorf("no answer for %q", op.Key)
		}}}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	returned := make(chan error, 1)
	start := time.Now()
	go func() { returned <- server.RunReconciler(rctx, store, cfg) }()
	select {
	case <-done:
	case err := <-returned:
		return 0, fmt.Errorf("the reconciler returned: %w", err)
	case <-time.After(c.passTimeout):
		return 0, fmt.Errorf("the pass settled %d of %d operations in %v", seen.Load(), len(answers), c.passTimeout)
	}
	elapsed := time.Since(start)
	cancel()
	<-returned
	if f := failed.Load(); f > 0 {
		return 0, fmt.Errorf("%d operations were not settled Completed", f)
	}
	return elapsed, nil
}

// checkSettled checks that each operation under prefix is done, once.
func checkSettled(ctx context.Context, pool *pgxpool.Pool, prefix string, n int) error {
	var done, other int
	err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'done' AND status = 201 AND attempt = 2),
    count(*) FILTER (WHERE NOT (state = 'done' AND status = 201 AND attempt = 2))
FROM idem_records WHERE route = $1 AND idem_key LIKE $2 || '-%'`, route, prefix).Scan(&done, &other)
	switch {
	case err != nil:
		return err
	case done != n || other != 0:
		return fmt.Errorf("after the pass %d records are done at attempt 2 and %d are not, want %d and 0", done, other, n)
	}
	return nil
}

// openSchema makes a schema of its own at dbURL, with the payments
// example's tables and accounts, and a pool of conns on it; drop closes
// the pool and drops the schema.
func openSchema(ctx context.Context, dbURL string, conns int) (pool *pgxpool.Pool, drop func(), err error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, nil, err
	}
	schema := "reconcile_bench_" + strings.ToLower(rand.Text()[:12])
	admin, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, nil, err
	}
	dropSchema := func() {
		if c, err := pgx.ConnectConfig(context.Background(), cfg.ConnConfig.Copy()); err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(context.Background())
		}
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = int32(conns)
	if pool, err = pgxpool.NewWithConfig(ctx, cfg); err == nil {
		err = setUp(ctx, pool)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		dropSchema()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); dropSchema() }, nil
}

// setUp applies the schema and funds the payment accounts.
func setUp(ctx context.Context, pool *pgxpool.Pool) error {
	if err := api.Migrate(ctx, pool); err != nil {
		return err
	}
	backend := api.NewPostgresBackend(pool)
	for i := range accounts {
		if _, err := backend.PutAccount(ctx, tenant, accountID(i), "EUR", 1<<50); err != nil {
			return errors.Join(errors.New("funding the accounts"), err)
		}
	}
	return nil
}

func orDefault(n, d int) int {
	if n <= 0 {
		return d
	}
	return n
}
