package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/outbox"
)

// benchPayments measures POST /v1/payments of the example API on Postgres
// (debit, payment row, stored response, one transaction), with and
// without a payment.created message enqueued in that transaction, in
// alternating rounds of n payments at concurrency in flight.
func benchPayments(ctx context.Context, dbURL string, o options) error {
	pool, err := openPool(ctx, dbURL, o.concurrency+4)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := api.Migrate(ctx, pool); err != nil {
		return err
	}
	if err := outbox.Migrate(ctx, pool); err != nil {
		return err
	}
	ob, err := outbox.New(pool, outbox.Config{Logger: slog.New(slog.DiscardHandler), FetchCooldown: o.cooldown})
	if err != nil {
		return err
	}
	quiet := slog.New(slog.DiscardHandler)
	plain := httptest.NewServer(api.New(api.Config{Backend: api.NewPostgresBackend(pool), Logger: quiet}))
	defer plain.Close()
	notified := httptest.NewServer(api.New(api.Config{
		Backend: api.NewPostgresBackend(pool).NotifyTo(ob, "http://127.0.0.1:9"), Logger: quiet}))
	defer notified.Close()
	if err := createAccounts(ctx, plain.URL); err != nil {
		return err
	}
	n := or(o.n, 4000)
	fmt.Printf("POST /v1/payments, %d per round, %d in flight (nothing dispatches: only the enqueue is measured)\n", n, o.concurrency)
	var sum [2]float64
	var ratios []float64
	for r := range o.rounds {
		var rates [2]float64
		for i, srv := range []*httptest.Server{plain, notified} {
			rate, err := payments(ctx, srv.URL, n, o.concurrency)
			if err != nil {
				return err
			}
			sum[i], rates[i] = sum[i]+rate, rate
			fmt.Printf("round %d %-20s %8.0f payments/s\n", r+1, []string{"without outbox", "with 1 message each"}[i], rate)
		}
		ratios = append(ratios, rates[1]/rates[0])
	}
	fmt.Printf("mean: without %.0f, with %.0f payments/s: with/without %.1f%%\n",
		sum[0]/float64(o.rounds), sum[1]/float64(o.rounds), 100*sum[1]/sum[0])
	fmt.Printf("median of the rounds' with/without: %.1f%% (from %.1f%% to %.1f%%)\n",
		100*median(ratios), 100*slices.Min(ratios), 100*slices.Max(ratios))
	return nil
}

const benchAccounts = 100

func createAccounts(ctx context.Context, base string) error {
	for i := range benchAccounts {
		body := `{"balance_cents": 1000000000000}`
		if _, err := call(ctx, "PUT", fmt.Sprintf("%s/v1/accounts/acc-%d", base, i), body, ""); err != nil {
			return err
		}
	}
	return nil
}

// payments makes n payments at concurrency in flight and returns the rate.
func payments(ctx context.Context, base string, n, concurrency int) (float64, error) {
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				body := fmt.Sprintf(`{"account_id":"acc-%d","amount_cents":1,"currency":"EUR"}`, i%benchAccounts)
				status, err := call(ctx, "POST", base+"/v1/payments", body, uuid.NewString())
				if err == nil && status != http.StatusCreated {
					err = fmt.Errorf("status %d", status)
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

func call(ctx context.Context, method, url, body, key string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer bench:bench")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
