package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/testserver"
)

// column is one client's run, as the report shows it.
type column struct {
	name    string
	report  testserver.Report  // the checker's verdict
	summary testserver.Summary // the event log: attempts on the wire, faults
	// budgetDenied and breakerTrips are -1 for a client without them.
	budgetDenied, breakerTrips int64
	// breakerNotClosed is how long the idem client's breaker was open or
	// probing; gaveUp counts the idem client's payments without a payment
	// id by why it gave them up (gaveUpBreaker, ...), nil for the naive
	// client.
	breakerNotClosed  time.Duration
	gaveUp            map[string]int
	p50, p99, elapsed time.Duration
	// waitedRetryAfter and waitedOwn add up the client's waits before its
	// retries: those the server asked for, and its own (backoff, pause).
	waitedRetryAfter, waitedOwn time.Duration
	notes                       notes // the payments' notifications
}

// trial is what one run of a client needs.
type trial struct {
	name   string
	tenant string // the run's own tenant: its accounts and payments
	payer  payer
	ops    []operation
	rules  []testserver.Rule
	seed   uint64
	// concurrency is the number of payments in flight at once.
	concurrency int
	backend     api.Backend
	store       server.Store
	stripKeys   bool
	progress    progress
}

// runTrial makes the trial's payments through a fresh testserver in front
// of the API, then asks the checker whether every promise was kept.
func runTrial(ctx context.Context, t trial) (column, error) {
	if err := createAccounts(ctx, t.backend, t.tenant, len(t.ops)); err != nil {
		return column{}, err
	}
	srv := testserver.New(apiHandler(t), testserver.Config{Seed: t.seed, Rules: t.rules, OperationHeader: operationHeader})
	defer srv.Close()

	var history testserver.History
	latencies := make([]time.Duration, len(t.ops))
	verdicts := make([]verdict, len(t.ops))
	var done atomic.Int64
	stop := t.progress.show(t.name, func() string { return fmt.Sprintf("%d/%d payments", done.Load(), len(t.ops)) })
	start := time.Now()
	work(ctx, len(t.ops), t.concurrency, func(i int) {
		begin := time.Now()
		v := t.payer.pay(ctx, srv.URL, t.tenant+":demo", t.ops[i])
		latencies[i], verdicts[i] = time.Since(begin), v
		record(&history, t.ops[i].id, v)
		done.Add(1)
	})
	elapsed := time.Since(start)
	stop()
	if err := ctx.Err(); err != nil {
		return column{}, err
	}
	srv.Close() // waits for the handlers still running (a delayed response, a drop)
	ledger, err := ledgerOf(ctx, t.backend, t.tenant)
	if err != nil {
		return column{}, err
	}
	c := column{
		name: t.name, report: testserver.Check(ledger, &history), summary: testserver.Summarize(srv.Events()),
		budgetDenied: -1, breakerTrips: -1, elapsed: elapsed,
		waitedRetryAfter: time.Duration(t.payer.waited().retryAfter.Load()),
		waitedOwn:        time.Duration(t.payer.waited().own.Load()),
	}
	c.p50, c.p99 = percentile(latencies, 50), percentile(latencies, 99)
	if _, ok := t.payer.(*idemPayer); ok {
		c.gaveUp = gaveUpCounts(verdicts)
	}
	return c, nil
}

// gaveUpCounts counts the idem client's verdicts without a payment by why
// the client gave them up; a 4xx answer is not counted (it is the
// payment's outcome).
func gaveUpCounts(vs []verdict) map[string]int {
	counts := map[string]int{}
	for _, v := range vs {
		if r := gaveUpReason(v.err); v.kind != testserver.OutcomeOK && r != "" {
			counts[r]++
		}
	}
	return counts
}

// apiHandler is the payments API, with keys optional so that the naive
// client's keyless payments run (unprotected; keyed ones are protected).
func apiHandler(t trial) http.Handler {
	h := api.New(api.Config{Backend: t.backend, Store: t.store, Keys: server.KeyOptional, Logger: slog.New(slog.DiscardHandler)})
	if !t.stripKeys {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(wire.HeaderKey) // a server that ignores keys: the idem column must fail
		h.ServeHTTP(w, r)
	})
}

// work runs do(0..n-1) on concurrency goroutines, until done or ctx ends.
func work(ctx context.Context, n, concurrency int, do func(i int)) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range jobs {
				do(i)
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
}

// record writes a verdict into the history.
func record(h *testserver.History, op string, v verdict) {
	switch v.kind {
	case testserver.OutcomeOK:
		h.OK(op, v.paymentID)
	case testserver.OutcomeFailed:
		h.Failed(op, v.err)
	default:
		h.Unknown(op, v.err)
	}
}

// ledgerOf reads the payments the API really made for the tenant: the
// ground truth, by operation (each payment's reference).
func ledgerOf(ctx context.Context, b api.Backend, tenant string) (*testserver.Ledger, error) {
	payments, err := b.Payments(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var l testserver.Ledger
	for _, p := range payments {
		l.Record(p.Reference, p.ID)
	}
	return &l, nil
}

// percentile returns the p-th percentile of ds (which it sorts).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*p/100)]
}
