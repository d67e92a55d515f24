package server

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// BenchmarkSQLStoreOverhead measures issue 43's goal: the payment endpoint
// of BenchmarkPaymentOverhead through database/sql, plain (its own
// *sql.Tx) and behind the middleware on a PostgresSQLStore (the request's
// *sql.Tx), in the same run as the pgx variants, plain and on a
// PostgresStore. The four take turns of 1,000 requests, the order rotating
// each round, at one concurrency (-bench.parallelism per CPU), each on a
// pool of 24 connections of its own (a pgx pool, a *sql.DB on pgx's stdlib
// driver) on one schema. b.N is the number of requests of each variant. It
// reports each variant's req/s and CPU per request (this process and the
// backends), and the ratios: "sql-vs-pg-%", the database/sql store's
// throughput over PostgresStore's (goal >= 90%); "pg-%" and "sql-%", each
// store's throughput over its own plain handler's (goal: within 3 points);
// and the same three by CPU per request ("-cpu-%").
//
//	go test -run '^$' -bench BenchmarkSQLStoreOverhead -benchtime 12000x ./server/
func BenchmarkSQLStoreOverhead(b *testing.B) {
	pool, app := benchPool(b)
	u, err := url.Parse(pool.Config().ConnString()) // its search_path and application_name, not its pool_max_conns
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Del("pool_max_conns")
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(24)
	db.SetMaxIdleConns(24)
	defer db.Close()
	cpu := cpuMeter{pool: pool, app: app}
	variants := []*overheadVariant{
		{name: "pg-plain", h: plainPayments(pool)},
		{name: "pg-idem", h: idemPayments(pool)},
		{name: "sql-plain", h: plainSQLPayments(db)},
		{name: "sql-idem", h: idemSQLPayments(db)},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	for _, v := range variants {
		mux := http.NewServeMux()
		mux.Handle("POST /v1/payments", v.h)
		v.srv = httptest.NewServer(mux)
		defer v.srv.Close()
	}
	workers := *benchParallelism * runtime.GOMAXPROCS(0)
	b.ResetTimer()
	for round := 0; variants[0].requests < b.N || variants[3].requests < b.N; round++ {
		for i := range variants {
			v := variants[(round+i)%len(variants)]
			n := min(overheadChunk, b.N-v.requests)
			if n <= 0 {
				continue
			}
			before := cpu.read(b)
			start := time.Now()
			v.run(b, client, n, workers)
			v.wall += time.Since(start)
			self, pg := cpu.used(b, before)
			v.cpu += self + pg
			v.pgCPU += pg
			v.requests += n
		}
	}
	b.StopTimer()
	tput := func(v *overheadVariant) float64 { return float64(v.requests) / v.wall.Seconds() }
	for _, v := range variants {
		b.ReportMetric(tput(v), v.name+"-req/s")
		b.ReportMetric(v.cpuPerRequest(), v.name+"-cpu-us/req")
	}
	pgPlain, pgIdem, sqlPlain, sqlIdem := variants[0], variants[1], variants[2], variants[3]
	b.ReportMetric(100*tput(sqlIdem)/tput(pgIdem), "sql-vs-pg-%")
	b.ReportMetric(100*tput(pgIdem)/tput(pgPlain), "pg-%")
	b.ReportMetric(100*tput(sqlIdem)/tput(sqlPlain), "sql-%")
	b.ReportMetric(100*pgIdem.cpuPerRequest()/sqlIdem.cpuPerRequest(), "sql-vs-pg-cpu-%")
	b.ReportMetric(100*pgPlain.cpuPerRequest()/pgIdem.cpuPerRequest(), "pg-cpu-%")
	b.ReportMetric(100*sqlPlain.cpuPerRequest()/sqlIdem.cpuPerRequest(), "sql-cpu-%")
	b.ReportMetric(0, "ns/op")
}

// paySQL is pay (the payment endpoint) on a *sql.Tx.
func paySQL(w http.ResponseWriter, r *http.Request, tx *sql.Tx) error {
	var req struct {
		Account int64 `json:"account"`
		Amount  int64 `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	ctx := r.Context()
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - $2 WHERE id = $1`, req.Account, req.Amount); err != nil {
		return err
	}
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO payments (account_id, amount) VALUES ($1, $2) RETURNING id`, req.Account, req.Amount).Scan(&id)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, err = fmt.Fprintf(w, `{"id":%d,"account":%d,"amount":%d,"status":"paid"}`, id, req.Account, req.Amount)
	return err
}

// plainSQLPayments is the payment endpoint in its own *sql.Tx.
func plainSQLPayments(db *sql.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, err := db.BeginTx(r.Context(), nil)
		if err == nil {
			if err = paySQL(w, r, tx); err == nil {
				err = tx.Commit()
			} else {
				_ = tx.Rollback()
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
}

// idemSQLPayments is the payment endpoint behind the middleware on a
// PostgresSQLStore, in the request's *sql.Tx.
func idemSQLPayments(db *sql.DB) http.Handler {
	return Middleware(NewPostgresSQLStore(db), quiet(Config{}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := SQLTx(r.Context())
		if err := paySQL(w, r, tx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
}
