//go:build unix

// Command payserver serves POST /v1/payments behind the idempotency
// middleware on a mysqlidem.Store, in Transactional mode, for the
// module's end-to-end tests: the handler inserts the payment in the
// request's *sql.Tx (table payments: op, the idempotency key, and
// amount), and answers 201 with the payment's id.
//
//	payserver -addr 127.0.0.1:8080 -dsn 'root@tcp(127.0.0.1:3306)/test'
//
// With PAYSERVER_CRASH_AFTER=n in the environment the process kills itself
// with SIGKILL the n-th time a handler has returned and its transaction is
// not yet committed (server.Hooks.Handled).
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver

	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/mysqlidem"
	"github.com/idemkit/idem/server"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	dsn := flag.String("dsn", "root@tcp(127.0.0.1:3306)/test?interpolateParams=true", "MySQL DSN")
	flag.Parse()
	if err := trace.FromEnv(os.Getenv); err != nil { // a test's trace of the run's steps
		log.Fatal(err)
	}
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(64)
	if err := mysqlidem.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}
	hooks, err := crashHooks(os.Getenv("PAYSERVER_CRASH_AFTER"))
	if err != nil {
		log.Fatal(err)
	}
	cfg := server.Config{Mode: server.Transactional, Hooks: hooks}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", server.Middleware(mysqlidem.New(db), cfg)(http.HandlerFunc(pay)))
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("payserver listening on %s", *addr)
	log.Fatal(srv.ListenAndServe())
}

// pay inserts the payment in the request's transaction.
func pay(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Amount int `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Amount <= 0 {
		http.Error(w, "want {\"amount\": n > 0}", http.StatusUnprocessableEntity)
		return
	}
	tx, _ := server.SQLTx(r.Context())
	res, err := tx.ExecContext(r.Context(), `INSERT INTO payments (op, amount) VALUES (?, ?)`,
		r.Header.Get("Idempotency-Key"), in.Amount)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	id, _ := res.LastInsertId()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":%d,"amount":%d}`, id, in.Amount)
}

// crashHooks kills the process in the after-th Handled hook; none when
// after is "".
func crashHooks(after string) (server.Hooks, error) {
	if after == "" {
		return server.Hooks{}, nil
	}
	n, err := strconv.ParseInt(after, 10, 64)
	if err != nil || n < 1 {
		return server.Hooks{}, fmt.Errorf("PAYSERVER_CRASH_AFTER=%q: want a count from 1", after)
	}
	var seen atomic.Int64
	return server.Hooks{Handled: func(context.Context, server.Event) {
		if seen.Add(1) == n {
			log.Printf("crash switch: SIGKILL between the handler's return and the commit")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}}, nil
}
