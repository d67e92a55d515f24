package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/server"
)

// timedStore records each Sweep of its Store: a batch holds the row locks
// of the records it deletes for as long as its statement runs, so that
// the longest batch bounds how long a claim can wait on the sweeper.
type timedStore struct {
	server.Store
	mu      sync.Mutex
	batches []batch
}

// batch is one Sweep call.
type batch struct {
	start   time.Time
	took    time.Duration
	deleted int
}

func (s *timedStore) Sweep(ctx context.Context, limit int) (int, error) {
	t0 := time.Now()
	n, err := s.Store.Sweep(ctx, limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, batch{t0, time.Since(t0), n})
	return n, err
}

// take returns the batches recorded since the last take.
func (s *timedStore) take() []batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batches
	s.batches = nil
	return b
}

// sweepPhase runs the interleaved turns against an API that keeps records
// for c.sweepKeep while server.RunSweeper runs on a pool of its own, and
// writes a row every c.sample.
func sweepPhase(ctx context.Context, c config, db dbTarget, pool *pgxpool.Pool, out io.Writer) error {
	spool, err := db.open(ctx, 2)
	if err != nil {
		return err
	}
	defer spool.Close()
	srv := httptest.NewServer(newAPI(pool, c.sweepKeep))
	defer srv.Close()
	e := newEndpoint(srv.URL, c.sweepInflight)
	defer e.client.CloseIdleConnections()
	store := &timedStore{Store: server.NewPostgresStore(spool)}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- server.RunSweeper(sctx, store, server.SweepConfig{Interval: c.sweepEvery, Batch: c.sweepBatch,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}()
	defer func() { cancel(); <-done }()

	batching := "the default batches"
	if c.sweepBatch > 0 {
		batching = fmt.Sprintf("batches of %d", c.sweepBatch)
	}
	fmt.Fprintf(out, "sweep phase: %v, records kept %v, RunSweeper every %v in %s on a pool of 2, %d in flight, a row every %v\n",
		c.sweep, c.sweepKeep, c.sweepEvery, batching, c.sweepInflight, c.sample)
	fmt.Fprintln(out, row(sweepColumns...))
	start, windowStart := time.Now(), time.Now()
	var window [2]tally
	var sum sweepSummary
	var sampleErr error
	each := func(plain, idem tally) {
		window[0].add(plain)
		window[1].add(idem)
		if time.Since(windowStart) < c.sample || sampleErr != nil {
			return
		}
		batches := store.take()
		var size tableSize
		size, sampleErr = sampleRow(ctx, out, pool, time.Since(start), window, batches)
		sum.add(window[1], batches, size)
		window, windowStart = [2]tally{}, time.Now()
	}
	plain, idem, err := e.interleaved(ctx, c.sweep, c.chunk, c.sweepInflight, each)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sweep phase: ratio %.1f%% (plain %.0f, idem %.0f req/s); %s\n",
		100*idem.rate()/plain.rate(), plain.rate(), idem.rate(), sum)
	return sampleErr
}

// sweepSummary is the sweep phase's totals over its rows.
type sweepSummary struct {
	inserted, swept   int
	longest           time.Duration
	first, last, most int64 // the table's size in bytes
}

func (s *sweepSummary) add(idem tally, batches []batch, size tableSize) {
	s.inserted += len(idem.requests)
	swept, longest := sweptBy(batches)
	s.swept += swept
	s.longest = max(s.longest, longest)
	if s.first == 0 {
		s.first = size.total
	}
	s.last, s.most = size.total, max(s.most, size.total)
}

func (s sweepSummary) String() string {
	return fmt.Sprintf("%d records inserted, %d swept, longest batch %.1f ms; table and indexes %.1f MB at the first row, %.1f MB at the last, %.1f MB at most",
		s.inserted, s.swept, float64(s.longest.Microseconds())/1000, mb(s.first), mb(s.last), mb(s.most))
}

// sweptBy returns the records the batches deleted and the longest of them.
func sweptBy(batches []batch) (swept int, longest time.Duration) {
	for _, b := range batches {
		swept += b.deleted
		longest = max(longest, b.took)
	}
	return swept, longest
}

// sampleRow writes one row of the sweep phase: the window's requests, the
// sweeper's batches in it, and the table's size.
func sampleRow(ctx context.Context, out io.Writer, pool *pgxpool.Pool, at time.Duration, window [2]tally, batches []batch) (tableSize, error) {
	s, err := measureSize(ctx, pool)
	var expired int
	if err == nil {
		err = pool.QueryRow(ctx, `SELECT count(*) FROM idem_records WHERE expires_at <= statement_timestamp()`).Scan(&expired)
	}
	if err != nil {
		return s, err
	}
	plain, idem := window[0], window[1]
	swept, longest := sweptBy(batches)
	all := idem.latencies(nil)
	during := idem.latencies(func(r request) bool { return overlaps(r, batches) })
	_, err = fmt.Fprintln(out, row(
		fmt.Sprintf("%.0f", at.Seconds()), fmt.Sprintf("%.0f", plain.rate()), fmt.Sprintf("%.0f", idem.rate()),
		fmt.Sprintf("%.1f", 100*idem.rate()/plain.rate()), fmt.Sprintf("%.2f", pct(all, 0.99)), fmt.Sprintf("%.2f", pct(all, 1)),
		fmt.Sprint(len(during)), fmt.Sprintf("%.2f", pct(during, 0.99)), fmt.Sprintf("%.2f", pct(during, 1)),
		fmt.Sprint(len(idem.requests)), fmt.Sprint(swept), fmt.Sprintf("%.1f", float64(longest.Microseconds())/1000),
		fmt.Sprint(expired), fmt.Sprint(s.live), fmt.Sprint(s.dead), fmt.Sprintf("%.1f", mb(s.total)), fmt.Sprint(s.autovacuums)))
	return s, err
}

// sweepColumns is the header of the sweep phase's rows: "in-sweep" are
// the idem requests that ran while a sweep batch did; "expired left" the
// expired records not yet swept when the row was written, which stays
// below an Interval's arrivals while the sweeper keeps up.
var sweepColumns = []string{"s", "plain req/s", "idem req/s", "ratio %", "idem p99 ms", "idem max ms",
	"in-sweep n", "in-sweep p99 ms", "in-sweep max ms", "inserted", "swept", "longest batch ms",
	"expired left", "live rows", "dead rows", "MB", "autovacuums"}

// row right-aligns cells under sweepColumns, so that rows can be written
// as they come.
func row(cells ...string) string {
	var b strings.Builder
	for i, c := range cells {
		fmt.Fprintf(&b, "%*s", max(len(sweepColumns[i]), 7)+2, c)
	}
	return b.String()
}

// overlaps reports whether r ran while one of the batches did.
func overlaps(r request, batches []batch) bool {
	end := r.start.Add(r.took)
	for _, b := range batches {
		if r.start.Before(b.start.Add(b.took)) && end.After(b.start) {
			return true
		}
	}
	return false
}
