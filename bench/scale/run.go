package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/server"
)

// run is the program; it writes its report to out.
func run(ctx context.Context, c config, out io.Writer) error {
	db, cleanup, err := database(ctx, c)
	if err != nil {
		return err
	}
	defer cleanup()
	pool, err := db.open(ctx, c.conns)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := setUp(ctx, pool, c.vacuumScale); err != nil {
		return err
	}
	where := "a private cluster (autovacuum on)"
	if c.db != "" {
		where = "a schema of its own at -db"
	}
	if c.pgOptions != "" && c.db == "" {
		where += ", " + c.pgOptions
	}
	if c.vacuumScale > 0 {
		where += fmt.Sprintf(", idem_records autovacuum scale factors %g", c.vacuumScale)
	}
	fmt.Fprintf(out, "scale bench: %s, pool of %d, %d CPUs, turns of %d requests, %v per measurement\n",
		where, c.conns, runtime.NumCPU(), c.chunk, c.duration)

	srv := httptest.NewServer(newAPI(pool, 0))
	defer srv.Close()
	e := newEndpoint(srv.URL, max(slices.Max(c.inflight), c.sweepInflight))
	defer e.client.CloseIdleConnections()
	template := newKey()
	if status, err := e.post(ctx, template); err != nil || status != 201 {
		return fmt.Errorf("the template payment: status %d, %v", status, err)
	}
	if err := ratios(ctx, c, pool, e, template, out); err != nil {
		return err
	}
	if c.sweep > 0 {
		if err := sweepPhase(ctx, c, db, pool, out); err != nil {
			return err
		}
	}
	return duplicates(ctx, c, pool, e, out)
}

// newAPI is the payments example on pool, keeping records for retention
// (0: the default, 24 hours); a request without a key runs without the
// middleware.
func newAPI(pool *pgxpool.Pool, retention time.Duration) http.Handler {
	return api.New(api.Config{Backend: api.NewPostgresBackend(pool), Store: server.NewPostgresStore(pool),
		Keys: server.KeyOptional, Retention: retention, Logger: slog.New(slog.DiscardHandler)})
}

// ratios fills the table to each size and measures the ratio there at
// each in-flight count.
func ratios(ctx context.Context, c config, pool *pgxpool.Pool, e *endpoint, template string, out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	defer w.Flush()
	rows := 1 // the template's record
	for _, size := range c.sizes {
		if size > rows {
			fmt.Fprintf(out, "filling to %d records\n", size)
			if err := fill(ctx, pool, template, rows, size, out); err != nil {
				return err
			}
			rows = size
		}
		s, err := measureSize(ctx, pool)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "at %d records: %s\n", size, s)
		fmt.Fprintln(w, "records\tin flight\tplain req/s\tidem req/s\tratio %\tplain p50 ms\tplain p99 ms\tidem p50 ms\tidem p99 ms\t")
		for _, n := range c.inflight {
			plain, idem, err := e.interleaved(ctx, c.duration, c.chunk, n, nil)
			if err != nil {
				return err
			}
			pl, il := plain.latencies(nil), idem.latencies(nil)
			fmt.Fprintf(w, "%d\t%d\t%.0f\t%.0f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", size, n, plain.rate(), idem.rate(),
				100*idem.rate()/plain.rate(), pct(pl, 0.5), pct(pl, 0.99), pct(il, 0.5), pct(il, 0.99))
			rows += len(idem.requests)
		}
		w.Flush()
	}
	return nil
}
