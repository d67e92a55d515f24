package server

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/pgtest"
)

// benchParallelism is the goroutines per CPU of BenchmarkPayment.
var benchParallelism = flag.Int("bench.parallelism", 8, "BenchmarkPayment: concurrent requests per CPU")

// benchAccounts spreads the balance updates so that row locks do not
// serialise the benchmark.
const benchAccounts = 1000

// pay is the payment endpoint of the benchmark: debit a balance, insert a
// payment row, answer 201 with the payment.
func pay(w http.ResponseWriter, r *http.Request, tx pgx.Tx) error {
	var req struct {
		Account int64 `json:"account"`
		Amount  int64 `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	ctx := r.Context()
	if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $2 WHERE id = $1`, req.Account, req.Amount); err != nil {
		return err
	}
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO payments (account_id, amount) VALUES ($1, $2) RETURNING id`, req.Account, req.Amount).Scan(&id)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, err = fmt.Fprintf(w, `{"id":%d,"account":%d,"amount":%d,"status":"paid"}`, id, req.Account, req.Amount)
	return err
}

// plainPayments is the payment endpoint without the middleware: pay in a
// transaction of its own.
func plainPayments(pool *pgxpool.Pool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := pgx.BeginFunc(r.Context(), pool, func(tx pgx.Tx) error { return pay(w, r, tx) })
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
}

// idemPayments is the payment endpoint behind the middleware (default
// Config) over Postgres: pay in the middleware's transaction.
func idemPayments(pool *pgxpool.Pool) http.Handler {
	return Middleware(NewPostgresStore(pool), quiet(Config{}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := Tx(r.Context())
		if err := pay(w, r, tx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
}

func benchPool(b *testing.B) (*pgxpool.Pool, string) {
	b.Helper()
	app := "idem_bench_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	pool := pgtest.NewPool(b, pgtest.SchemaURL(b)+"&pool_max_conns=24&application_name="+app)
	ctx := context.Background()
	if err := Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	_, err := pool.Exec(ctx, `
		CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO accounts SELECT g, 1000000000 FROM generate_series(0, 999) AS g;
		CREATE TABLE payments (id bigserial PRIMARY KEY, account_id bigint NOT NULL REFERENCES accounts,
			amount bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now());`)
	if err != nil {
		b.Fatal(err)
	}
	return pool, app
}

// BenchmarkPayment measures the payment endpoint through real HTTP on
// loopback, on one pool and at one concurrency (-bench.parallelism
// goroutines per CPU, 8 by default):
// "plain" runs it in its own transaction without the middleware, "idem"
// behind the middleware in its transaction with a new key per request, and
// "replay" retries one stored key. It reports req/s and p50/p99 latency.
//
//	go test -run '^$' -bench BenchmarkPayment -benchtime 20000x ./server/
//	go test -run '^$' -bench BenchmarkPayment -benchtime 20000x ./server/ -args -bench.parallelism=1
func BenchmarkPayment(b *testing.B) {
	pool, app := benchPool(b)
	cpu := cpuMeter{pool: pool, app: app}
	plain, idem := plainPayments(pool), idemPayments(pool)
	fresh := func(i int64) (string, int64) { return uuid.NewString(), i }
	replayKey := uuid.NewString()
	retry := func(int64) (string, int64) { return replayKey, 0 } // the same request every time
	b.Run("plain", func(b *testing.B) { benchHTTP(b, cpu, plain, fresh) })
	b.Run("idem", func(b *testing.B) { benchHTTP(b, cpu, idem, fresh) })
	b.Run("replay", func(b *testing.B) { benchHTTP(b, cpu, idem, retry) })
}

// benchHTTP posts payments to h from the benchmark's goroutines; request gives
// the key and the payment number of the i-th request.
func benchHTTP(b *testing.B, cpu cpuMeter, h http.Handler, request func(i int64) (key string, n int64)) {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()

	var next atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	b.SetParallelism(*benchParallelism)
	b.ResetTimer()
	before := cpu.read(b)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			key, n := request(next.Add(1))
			t0 := time.Now()
			if err := postPayment(client, srv.URL, key, n); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	cpu.report(b, before, len(latencies))
	reportLatencies(b, latencies, elapsed)
}

func postPayment(client *http.Client, url, key string, i int64) error {
	body := fmt.Sprintf(`{"account":%d,"amount":%d}`, i%benchAccounts, 1+i%97)
	req, err := http.NewRequest(http.MethodPost, url+"/v1/payments", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func reportLatencies(b *testing.B, latencies []time.Duration, elapsed time.Duration) {
	if len(latencies) == 0 {
		return
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op") // req/s is the figure; ns/op double counts parallel time
}
