package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/server"
)

// A retried POST runs once: the retry gets the stored response.
func ExampleMiddleware() {
	charges := 0
	createPayment := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"pay_%d"}`, charges)
	})
	idem := server.Middleware(server.NewMemoryStore(), server.Config{})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", idem(createPayment))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
		resp, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d replayed=%q %s\n", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), body)
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201 replayed="" {"id":"pay_1"}
	// 201 replayed="true" {"id":"pay_1"}
	// charges: 1
}

// With Postgres, the handler's mutations and the stored response commit
// together in the transaction that Tx gives it.
func ExampleTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/payments")
	if err != nil {
		log.Fatal(err)
	}
	if err := server.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	createPayment := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := server.Tx(r.Context())
		var id int64
		err := tx.QueryRow(r.Context(), `INSERT INTO payments (amount) VALUES (100) RETURNING id`).Scan(&id)
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // a 5xx rolls back and frees the key
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, id)
	})
	tenantAndUser := func(r *http.Request) (tenant, principal string) {
		return r.Header.Get("X-Tenant"), r.Header.Get("X-User") // in real code: from the verified credentials
	}
	idem := server.Middleware(server.NewPostgresStore(pool), server.Config{Scope: tenantAndUser})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", idem(createPayment))
	go func() { _ = server.RunSweeper(ctx, server.NewPostgresStore(pool), server.SweepConfig{}) }()
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}

// A handler whose effect leaves the database runs in Leased mode: it
// records a recovery point before the effect, and an attempt that takes
// over reconciles instead of acting twice.
func ExampleLeaseFrom() {
	charge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lease, _ := server.LeaseFrom(r.Context())
		gatewayKey := r.Header.Get("Idempotency-Key") // the same downstream key on every attempt
		if rec, took := lease.Recovery(); took && rec.Point == "sent" {
			// An earlier attempt may have charged: look the charge up by
			// gatewayKey (or resend with it) instead of charging anew.
			_ = rec.Data
		}
		data, _ := json.Marshal(map[string]string{"gateway_key": gatewayKey})
		if err := lease.Checkpoint(r.Context(), "sent", data); err != nil {
			http.Error(w, "lease lost", http.StatusConflict)
			return
		}
		_ = lease.Extend(r.Context(), time.Minute) // a slow gateway: keep the lease
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	store := server.NewMemoryStore()
	mux.Handle("POST /v1/charges", server.Middleware(store, server.Config{Mode: server.Leased})(charge))
}
