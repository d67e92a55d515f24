package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/outbox"
)

// deadConfig is the dispatcher of the dead-host run: the defaults (the
// idem client's breaker and budget on, 20 workers), with a retry window
// that ends within the run: 6 deliveries, backoffs from 1 s to 8 s.
func deadConfig() outbox.Config {
	return outbox.Config{MaxAttempts: 6, MinBackoff: time.Second, MaxBackoff: 8 * time.Second,
		Logger: slog.New(slog.DiscardHandler)}
}

// deadSpan is the time deadConfig's MaxAttempts implies: the longest its
// five backoffs add up to (1 + 2 + 4 + 8 + 8 s).
const deadSpan = 23 * time.Second

// sqlCountUpdates makes every row update of river_job leave a row in
// bench_updates, with its time: the run's row updates, second by second.
const sqlCountUpdates = `CREATE UNLOGGED TABLE bench_updates (at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION bench_count_update() RETURNS trigger LANGUAGE plpgsql AS
    $$BEGIN INSERT INTO bench_updates DEFAULT VALUES; RETURN NULL; END$$;
CREATE TRIGGER bench_count_update AFTER UPDATE ON river_job FOR EACH ROW EXECUTE FUNCTION bench_count_update()`

// benchDead measures issue 26's outbox row: o.n messages (2,000) to a
// host that answers 503 for the whole run (-duration, 60 s), one
// dispatcher with deadConfig: river_job's row updates per second, the
// requests that reached the host, and the messages parked, with the time
// from enqueue to parking.
func benchDead(ctx context.Context, dbURL string, o options) error {
	pool, err := migratedPool(ctx, dbURL, 16)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, sqlCountUpdates); err != nil {
		return err
	}
	var reached atomic.Int64
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer host.Close()
	ob, err := outbox.New(pool, deadConfig())
	if err != nil {
		return err
	}
	n := or(o.n, 2000)
	if err := enqueueBatch(ctx, pool, ob, host.URL, "dead-", n); err != nil {
		return err
	}
	fmt.Printf("%d messages to a host answering 503 for %s; MaxAttempts 6, backoff 1s to 8s (the time MaxAttempts implies: %s)\n", n, o.seconds, deadSpan)
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ob.Run(runCtx) }()
	time.Sleep(o.seconds)
	stop()
	if err := <-done; err != nil {
		return err
	}
	if err := printUpdates(ctx, pool, start, o.seconds); err != nil {
		return err
	}
	fmt.Printf("requests that reached the host: %d\n", reached.Load())
	return printParked(ctx, ob, n)
}

// printUpdates prints river_job's row updates: in all, in the first 5 s
// (every message's first delivery), and per second after.
func printUpdates(ctx context.Context, pool *pgxpool.Pool, start time.Time, d time.Duration) error {
	rows, err := pool.Query(ctx, `SELECT floor(extract(epoch FROM at - $1::timestamptz))::int, count(*)
FROM bench_updates GROUP BY 1 ORDER BY 1`, start)
	if err != nil {
		return err
	}
	perSecond := make([]int, int(d.Seconds())+1)
	var sec, count int
	_, err = pgx.ForEachRow(rows, []any{&sec, &count}, func() error {
		if sec >= 0 && sec < len(perSecond) {
			perSecond[sec] += count
		}
		return nil
	})
	if err != nil {
		return err
	}
	total, first := 0, 0
	for i, c := range perSecond {
		total += c
		if i < 5 {
			first += c
		}
	}
	after := perSecond[min(5, len(perSecond)):]
	peak := 0
	if len(after) > 0 {
		peak = slices.Max(after)
	}
	fmt.Printf("river_job row updates: %d in %s (%.0f/s); first 5 s: %d; after: %.1f/s on average, at most %d in a second\n",
		total, d, float64(total)/d.Seconds(), first, float64(total-first)/max(d.Seconds()-5, 1), peak)
	fmt.Printf("per second: %v\n", perSecond)
	return nil
}

// printParked prints how many of the n messages were parked, and the
// time from enqueue to parking (median and maximum).
func printParked(ctx context.Context, ob *outbox.Outbox, n int) error {
	var ages []time.Duration
	after := int64(0)
	for {
		page, err := ob.Parked(ctx, after, 500)
		if err != nil {
			return err
		}
		for _, p := range page {
			ages = append(ages, p.ParkedAt.Sub(p.EnqueuedAt))
			after = p.ID
		}
		if len(page) < 500 {
			break
		}
	}
	if len(ages) == 0 {
		fmt.Printf("parked: 0 of %d\n", n)
		return nil
	}
	slices.Sort(ages)
	fmt.Printf("parked: %d of %d; enqueue to parked: median %s, max %s\n", len(ages), n,
		ages[len(ages)/2].Round(100*time.Millisecond), ages[len(ages)-1].Round(100*time.Millisecond))
	return nil
}
