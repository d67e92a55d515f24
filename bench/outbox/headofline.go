package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
)

// holHealthy is how many messages to the healthy host each case times.
const holHealthy = 10

// holLimit bounds the wait for the healthy messages of one case.
const holLimit = 30 * time.Second

// holCase is one head-of-line case: n messages to a bad host enqueued
// before the healthy ones, with the client's breaker on or off.
type holCase struct {
	name    string
	bad     int
	handler http.HandlerFunc // the bad host
	breaker bool
}

// hang holds a request until the client gives up on it: it reads the
// body first, so that net/http notices the client's close.
func hang(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// unavailable answers 503 at once.
func unavailable(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusServiceUnavailable)
}

// holSettle is how long a case's dispatcher (or River alone's client)
// runs, its backlog relayed, before the healthy messages are enqueued:
// its producers have started, and the backlog is being delivered.
const holSettle = 500 * time.Millisecond

// benchHeadOfLine measures issue 28's head-of-line figures: one
// dispatcher (Workers 4, Timeout 2 s) runs with messages to a bad host
// in its queue (40 to a host that hangs, or 2,000 to one that answers
// 503 at once, breaker off), relayed; then 10 messages to a healthy host
// are enqueued, and timed from their commit to the last delivered, and
// alone (nothing else queued); o.rounds rounds, medians. The bounds: River
// alone, 10 bare jobs from their commit to a no-op worker in a running
// client; and River alone passing 2,000 bare jobs then 10 in one queue,
// with as many slots as the dispatcher fetched at once before
// Config.Queues (16: four times its Workers), and with 200.
func benchHeadOfLine(ctx context.Context, dbURL string, o options) error {
	pool, err := migratedPool(ctx, dbURL, 16)
	if err != nil {
		return err
	}
	defer pool.Close()
	cases := []holCase{
		{"alone", 0, nil, true},
		{"behind 40 hanging (breaker on)", 40, hang, true},
		{"behind 40 hanging (breaker off)", 40, hang, false},
		{"behind 2,000 answering 503 (breaker off)", 2000, unavailable, false},
	}
	fmt.Printf("one dispatcher, Workers 4, Timeout 2s: %d messages to a healthy host, from their commit to the last delivered, %d rounds\n", holHealthy, o.rounds)
	bounds := []struct {
		name string
		run  func() (time.Duration, error)
	}{
		{"bound: River alone, 10 bare jobs, commit to worked", func() (time.Duration, error) { return holRiverAlone(ctx, pool) }},
		{riverName(16), func() (time.Duration, error) { return holRiver(ctx, pool, 2000, 16) }},
		{riverName(200), func() (time.Duration, error) { return holRiver(ctx, pool, 2000, 200) }},
	}
	names := casesNames(cases)
	times := make([][]time.Duration, len(cases)+len(bounds))
	for round := range o.rounds {
		for i, c := range cases {
			d, got, shared, err := holRun(ctx, pool, c)
			if err != nil {
				return err
			}
			times[i] = append(times[i], d)
			note := ""
			if shared && c.bad > 0 {
				note = " (in the bad host's queue)"
			}
			fmt.Printf("round %d %-52s %d of %d in %s%s\n", round+1, c.name, got, holHealthy, d.Round(100*time.Microsecond), note)
		}
		for j, b := range bounds {
			d, err := b.run()
			if err != nil {
				return err
			}
			times[len(cases)+j] = append(times[len(cases)+j], d)
			fmt.Printf("round %d %-52s %s\n", round+1, b.name, d.Round(100*time.Microsecond))
		}
	}
	for _, b := range bounds {
		names = append(names, b.name)
	}
	for i, ts := range times {
		slices.Sort(ts)
		fmt.Printf("median of %d rounds, %-52s %s [%s, %s]\n", len(ts), names[i]+":", ts[len(ts)/2].Round(100*time.Microsecond),
			ts[0].Round(100*time.Microsecond), ts[len(ts)-1].Round(100*time.Microsecond))
	}
	return nil
}

func riverName(slots int) string {
	return fmt.Sprintf("bound: River alone, one queue, %d slots, 10 behind 2,000", slots)
}

func casesNames(cases []holCase) []string {
	var out []string
	for _, c := range cases {
		out = append(out, c.name)
	}
	return out
}

// holRun runs one case on an empty queue: it starts the dispatcher with
// the bad host's messages, waits until they are relayed and then
// holSettle, enqueues the healthy messages, and returns the time from
// their commit to the last delivered (holLimit when not all were), how
// many were, and whether they were in the bad host's River queue.
func holRun(ctx context.Context, pool *pgxpool.Pool, c holCase) (took time.Duration, got int, shared bool, err error) {
	if _, err := pool.Exec(ctx, "TRUNCATE river_job, idem_outbox_enqueued"); err != nil {
		return 0, 0, false, err
	}
	healthy := newSink(holHealthy)
	defer healthy.srv.Close()
	cfg := outbox.Config{Workers: 4, Timeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler),
		Client: idem.Config{Breaker: idem.BreakerConfig{Disabled: !c.breaker}}}
	ob, err := outbox.New(pool, cfg)
	if err != nil {
		return 0, 0, false, err
	}
	if c.bad > 0 {
		bad := httptest.NewServer(c.handler)
		defer func() { bad.CloseClientConnections(); bad.Close() }()
		if err := enqueueBatch(ctx, pool, ob, bad.URL, "bad-", c.bad); err != nil {
			return 0, 0, false, err
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ob.Run(runCtx) }()
	defer func() { stop(); <-done }()
	if err := relayed(ctx, pool); err != nil {
		return 0, 0, false, err
	}
	time.Sleep(holSettle)
	if err := enqueueBatch(ctx, pool, ob, healthy.srv.URL, "ok-", holHealthy); err != nil {
		return 0, 0, false, err
	}
	start := time.Now()
	got = holHealthy
	select {
	case <-healthy.all:
		took = time.Since(start)
	case <-time.After(holLimit):
		healthy.mu.Lock()
		took, got = holLimit, len(healthy.seen)
		healthy.mu.Unlock()
	}
	shared, err = sharedQueue(ctx, pool)
	return took, got, shared, err
}

// sharedQueue reports whether the healthy and the bad host's messages
// were in the same River queue (see outbox.Config.Queues).
func sharedQueue(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var shared bool
	err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM river_job b JOIN river_job h ON b.queue = h.queue
WHERE b.args->>'key' LIKE 'bad-%' AND h.args->>'key' LIKE 'ok-%')`).Scan(&shared)
	return shared, err
}

// relayed waits until the table of enqueued messages is empty: the bad
// host's messages are in River's queue, ahead of those enqueued next.
func relayed(ctx context.Context, pool *pgxpool.Pool) error {
	deadline := time.Now().Add(holLimit)
	for {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM idem_outbox_enqueued").Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d messages not relayed within %s", n, holLimit)
		}
		time.Sleep(time.Millisecond)
	}
}

// riverClient is a River client on pool whose workers complete a bare job
// at once, noting its key in s, with slots workers in the default queue.
func riverClient(pool *pgxpool.Pool, s *sink, slots int) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{s: s})
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: slots}},
		Workers: workers, FetchCooldown: 2 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
}

// holRiverAlone is the floor of the healthy messages' time: River alone,
// a running client (Workers 4, after holSettle), 10 bare jobs from their
// commit to the last worked.
func holRiverAlone(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return 0, err
	}
	s := newSink(holHealthy)
	s.srv.Close() // River's workers note the keys themselves
	client, err := riverClient(pool, s, 4)
	if err != nil {
		return 0, err
	}
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = client.Stop(ctx) }()
	time.Sleep(holSettle)
	var params []river.InsertManyParams
	for i := range holHealthy {
		params = append(params, river.InsertManyParams{Args: riverArgs{Key: fmt.Sprintf("ok-%d", i)}})
	}
	if _, err := client.InsertMany(ctx, params); err != nil {
		return 0, err
	}
	start := time.Now()
	select {
	case <-s.all:
		return time.Since(start), nil
	case <-time.After(holLimit):
		return holLimit, nil
	}
}

// holRiver is the bound of one FIFO queue: River alone, with slots
// workers that complete a bare job at once, from Start to the last of 10
// jobs enqueued behind n others.
func holRiver(ctx context.Context, pool *pgxpool.Pool, n, slots int) (time.Duration, error) {
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return 0, err
	}
	s := newSink(holHealthy)
	s.srv.Close() // River's workers note the keys themselves
	client, err := riverClient(pool, s, slots)
	if err != nil {
		return 0, err
	}
	var params []river.InsertManyParams
	for i := range n {
		params = append(params, river.InsertManyParams{Args: riverArgs{Key: fmt.Sprintf("bad-%d", i)}})
	}
	for i := range holHealthy {
		params = append(params, river.InsertManyParams{Args: riverArgs{Key: fmt.Sprintf("ok-%d", i)}})
	}
	if _, err := client.InsertMany(ctx, params); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.want = n + holHealthy // every key is noted: the last ones close s.all
	s.mu.Unlock()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = client.Stop(ctx) }()
	select {
	case <-s.all:
		return time.Since(start), nil
	case <-time.After(holLimit):
		return holLimit, nil
	}
}
