package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// duplicates measures, at the table's final size, the replay path (one
// stored key retried by the in-flight count of the last ratio) and
// duplicate storms (c.storm concurrent requests with one new key).
func duplicates(ctx context.Context, c config, pool *pgxpool.Pool, e *endpoint, out io.Writer) error {
	s, err := measureSize(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "duplicates at %s\n", s)
	if c.reply > 0 {
		key := newKey()
		if status, err := e.post(ctx, key); err != nil || status != http.StatusCreated {
			return fmt.Errorf("the replayed payment: status %d, %v", status, err)
		}
		workers := slices.Max(c.inflight)
		t, err := e.turn(ctx, c.reply, workers, func() string { return key })
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		l := t.latencies(nil)
		fmt.Fprintf(out, "replay: %d requests of one key, %d in flight: %.0f req/s, p50 %.2f ms, p99 %.2f ms\n",
			len(l), workers, t.rate(), pct(l, 0.5), pct(l, 0.99))
	}
	if c.storms > 0 {
		return storms(ctx, c, pool, e.url, out)
	}
	return nil
}

// storms sends c.storms storms after one that warms the connections up,
// and checks that each paid once.
func storms(ctx context.Context, c config, pool *pgxpool.Pool, url string, out io.Writer) error {
	e := newEndpoint(url, c.storm)
	defer e.client.CloseIdleConnections()
	var all []time.Duration
	statuses := map[int]int{}
	var wall time.Duration
	for i := range c.storms + 1 {
		key := newKey()
		lat, st, took, err := storm(ctx, e, key, c.storm)
		if err != nil {
			return err
		}
		var paid int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE idempotency_key = $1`, key).Scan(&paid); err != nil {
			return err
		}
		if paid != 1 {
			return fmt.Errorf("storm %d: %d payments for one key, want 1", i, paid)
		}
		if i == 0 {
			continue // the warm-up
		}
		all = append(all, lat...)
		for code, n := range st {
			statuses[code] += n
		}
		wall += took
	}
	slices.Sort(all)
	fmt.Fprintf(out, "storm: %d storms of %d requests with one key: p50 %.2f ms, p99 %.2f ms, %.1f ms per storm; statuses %v, one payment each\n",
		c.storms, c.storm, pct(all, 0.5), pct(all, 0.99), float64(wall.Microseconds())/1000/float64(c.storms), statuses)
	return nil
}

// storm releases n requests with key at once and returns their
// latencies, their statuses and the time from release to the last answer.
func storm(ctx context.Context, e *endpoint, key string, n int) ([]time.Duration, map[int]int, time.Duration, error) {
	release := make(chan struct{})
	var mu sync.Mutex
	var lat []time.Duration
	statuses := map[int]int{}
	var firstErr error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-release
			t0 := time.Now()
			status, err := e.post(ctx, key)
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, time.Since(t0))
			statuses[status]++
			firstErr = cmp.Or(firstErr, err)
		})
	}
	start := time.Now()
	close(release)
	wg.Wait()
	return lat, statuses, time.Since(start), firstErr
}
