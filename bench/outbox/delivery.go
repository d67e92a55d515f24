package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/outbox"
)

// sink is a loopback receiver: it answers 201 and notes when each key
// first arrived.
type sink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen map[string]time.Time
	all  chan struct{} // closed when want keys arrived
	want int
}

func newSink(want int) *sink {
	s := &sink{seen: map[string]time.Time{}, all: make(chan struct{}), want: want}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.note(r.Header.Get("Idempotency-Key"), time.Now())
		w.WriteHeader(http.StatusCreated)
	}))
	return s
}

// note records that key arrived at now, unless it arrived before.
func (s *sink) note(key string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[key]; !ok {
		s.seen[key] = now
		if len(s.seen) == s.want {
			close(s.all)
		}
	}
}

func message(url, key string) outbox.Message {
	return outbox.Message{Name: "bench", Method: "POST", URL: url, Key: key,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"payment_id":"pay_0123456789"}`)}
}

// benchDeliver enqueues n messages, then measures how fast 1 (then 2)
// dispatchers deliver them to a loopback sink.
func benchDeliver(ctx context.Context, dbURL string, o options) error {
	pool, err := migratedPool(ctx, dbURL, 8)
	if err != nil {
		return err
	}
	defer pool.Close()
	n := or(o.n, 10000)
	counts := []int{1, 2}
	if o.dispatcher > 0 {
		counts = []int{o.dispatcher}
	}
	for round, d := range counts {
		s := newSink(n)
		ob, err := outbox.New(pool, outbox.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		if err := enqueueBatch(ctx, pool, ob, s.srv.URL, fmt.Sprintf("r%d-", round), n); err != nil {
			return err
		}
		elapsed, err := dispatch(ctx, dbURL, d, o.cooldown, s)
		if err != nil {
			return err
		}
		s.srv.Close()
		fmt.Printf("%d dispatcher(s): %d messages in %s: %.0f messages/s\n", d, n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	}
	return nil
}

func enqueueBatch(ctx context.Context, pool *pgxpool.Pool, ob *outbox.Outbox, url, prefix string, n int) error {
	for start := 0; start < n; start += 500 {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for i := start; i < min(start+500, n); i++ {
				if _, err := ob.Enqueue(ctx, tx, message(url, fmt.Sprintf("%s%d", prefix, i))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// dispatch runs d dispatchers, each an Outbox (with Config.FetchCooldown
// cooldown) on a pool of its own, until the sink got everything; it
// returns the time that took.
func dispatch(ctx context.Context, dbURL string, d int, cooldown time.Duration, s *sink) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	start := time.Now()
	for range d {
		pool, err := openPool(ctx, dbURL, 10)
		if err != nil {
			return 0, err
		}
		ob, err := outbox.New(pool, outbox.Config{Logger: slog.New(slog.DiscardHandler), FetchCooldown: cooldown})
		if err != nil {
			return 0, err
		}
		wg.Go(func() { _ = ob.Run(ctx); pool.Close() })
	}
	select {
	case <-s.all:
		return time.Since(start), nil
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("not delivered within 5 minutes")
	}
}

// percentiles returns the p50 and p99 of ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(ds)
	return ds[len(ds)*50/100], ds[min(len(ds)-1, len(ds)*99/100)]
}
