package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/server"
)

// result is the outcome of a demo run.
type result struct {
	idem, naive column
}

// exitCode is 1 when the idem column broke a promise, or the outbox did
// in either column (a notification delivered twice, or lost), else 0. The
// naive column's double payments are the point of the demo, not a failure.
func (r result) exitCode() int {
	if r.idem.report.Err() != nil || r.idem.notes.violated() || r.naive.notes.violated() {
		return 1
	}
	return 0
}

// settleTimeout bounds the wait, after a trial, for its notifications to
// be delivered or parked.
const settleTimeout = time.Minute

// run is the demo: it makes the payments with both clients and prints the
// report on out, and its progress on pr.
func run(ctx context.Context, o options, out io.Writer, pr progress) (result, error) {
	rate, err := parseFaults(o.faults)
	if err != nil {
		return result{}, err
	}
	st, err := openStorage(ctx, o, o.concurrency)
	if err != nil {
		return result{}, err
	}
	defer st.close()
	var nt *notifier // nil on MySQL: no outbox runs there
	if o.mysql == "" {
		if nt, err = startNotifier(ctx, o, rate, st); err != nil {
			return result{}, err
		}
		defer func() { _ = nt.stop() }()
	}
	if o.storeLatency > 0 { // after the outbox, which needs the backend's own type
		st.backend = newSlowBackend(st.backend, o.storeLatency, o.seed)
		st.name += fmt.Sprintf(" (payments take %s, 0.8x to 1.2x)", o.storeLatency)
	}

	ops := workload(o.seed, o.n)
	runID := strconv.FormatInt(time.Now().UnixNano(), 36)
	printHeader(out, o, rate, st.name)

	t := trial{
		ops: ops, seed: o.seed, rules: faultRules(o.seed, rate, o.attemptTimeout, ops),
		concurrency: o.concurrency, backend: st.backend, store: st.idem, stripKeys: o.stripKeys, progress: pr,
	}
	var res result
	base := transport(o.concurrency)
	ip := newIdemPayer(base, o.attemptTimeout)
	t.name, t.tenant, t.payer = "idem client", "demo-"+runID+"-idem", ip
	if res.idem, err = runNotifiedTrial(ctx, t, nt); err != nil {
		return result{}, err
	}
	res.idem.budgetDenied, res.idem.breakerTrips = ip.budget.Stats().Denied, ip.trips.Load()
	res.idem.breakerNotClosed = ip.breakerNotClosed()

	t.name, t.tenant, t.payer = "naive client", "demo-"+runID+"-naive", newNaivePayer(transport(o.concurrency), o.attemptTimeout)
	if res.naive, err = runNotifiedTrial(ctx, t, nt); err != nil {
		return result{}, err
	}
	printReport(out, res)
	return res, nil
}

// printHeader prints what the demo is about to do, and how to run it again.
func printHeader(out io.Writer, o options, rate float64, store string) {
	fmt.Fprintf(out, "idem demo: %d payments, made twice through a fault-injecting proxy\n", o.n)
	fmt.Fprintf(out, "seed %d (rerun: %s)\n", o.seed, o.command())
	fmt.Fprintln(out, "A rerun meets the same fault at every (payment, attempt) and makes the same payments. Timing is not replayed:\n"+
		"which retries the idem client's budget allows and when its breaker opens depend on it, so under heavy faults\n"+
		"the idem column's counts may differ by a few; its promises (no double payment, no lost ok) hold in every run.")
	fmt.Fprintf(out, "faults %s: %.0f%% of attempts, and 503 bursts for %.1f%% of payments; store %s, concurrency %d\n\n",
		o.faults, 100*rate, 100*rate*burstShare, store, o.concurrency)
}

// startNotifier starts the notifier of the storage's outbox.
func startNotifier(ctx context.Context, o options, rate float64, st *storage) (*notifier, error) {
	nt, err := newNotifier(ctx, o.db, o.seed, rate, o.attemptTimeout)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if err := nt.openOutbox(st, o.attemptTimeout); err != nil {
		nt.srv.Close()
		nt.closePools()
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return nt, nil
}

// runNotifiedTrial runs the trial, then waits for its payments'
// notifications and checks them; with no notifier (nt nil) the column's
// notes say that none ran.
func runNotifiedTrial(ctx context.Context, t trial, nt *notifier) (column, error) {
	if nt == nil {
		c, err := runTrial(ctx, t)
		c.notes.off = true
		return c, err
	}
	before := nt.now(notes{})
	c, err := runTrial(ctx, t)
	if err != nil {
		return c, err
	}
	stop := t.progress.show(t.name+", notifications", func() string {
		now := nt.now(before)
		return fmt.Sprintf("%d delivered, %d parked", now.delivered, now.parked)
	})
	c.notes, err = nt.settle(ctx, t.backend, t.tenant, before, settleTimeout)
	stop()
	return c, err
}

// transport is the clients' base transport: keep-alive connections for
// every payment in flight.
func transport(concurrency int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = concurrency
	return t
}

// storage is where the API keeps its data and its idempotency records.
type storage struct {
	backend api.Backend
	idem    server.Store
	name    string
	close   func()
}

// openStorage returns MySQL storage when o.mysql is set, memory storage
// when o.db is empty, else Postgres storage (the schema applied, expired
// idempotency records swept).
func openStorage(ctx context.Context, o options, concurrency int) (*storage, error) {
	url := o.db
	if o.mysql != "" {
		return openMySQLStorage(ctx, o.mysql, concurrency)
	}
	if url == "" {
		return &storage{backend: api.NewMemoryBackend(), idem: server.NewMemoryStore(), name: "memory", close: func() {}}, nil
	}
	pool, err := openPool(ctx, url, concurrency)
	if err != nil {
		return nil, fmt.Errorf("-db: %w", err)
	}
	return &storage{backend: api.NewPostgresBackend(pool), idem: server.NewPostgresStore(pool), name: "postgres", close: pool.Close}, nil
}

// openPool opens a pool with a connection per payment in flight (unless
// the URL sets pool_max_conns), applies the schema and sweeps the expired
// idempotency records of earlier runs.
func openPool(ctx context.Context, url string, concurrency int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = int32(min(concurrency+4, 64))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err = api.Migrate(ctx, pool); err == nil {
		_, err = server.NewPostgresStore(pool).Sweep(ctx, 100_000)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}
