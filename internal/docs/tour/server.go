package tour

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/server"
)

// Routes serves POST /v1/payments, each payment once per key and scope.
func Routes(ctx context.Context, pool *pgxpool.Pool) (http.Handler, error) {
	if err := server.Migrate(ctx, pool); err != nil { // the idem_records table; idempotent
		return nil, err
	}
	store := server.NewPostgresStore(pool)
	go server.RunSweeper(ctx, store, server.SweepConfig{}) // deletes records past their retention
	mw := server.Middleware(store, server.Config{Scope: tenantAndUser})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw(http.HandlerFunc(createPayment))) // mounted per route
	return mux, nil
}

// tenantAndUser scopes keys to their caller: in real code, by its verified credentials.
func tenantAndUser(r *http.Request) (tenant, principal string) {
	return r.Header.Get("X-Tenant"), r.Header.Get("X-User")
}

func createPayment(w http.ResponseWriter, r *http.Request) {
	tx, _ := server.Tx(r.Context()) // commits with the stored response; a 5xx or a panic rolls both back
	if _, err := tx.Exec(r.Context(), "INSERT INTO payments DEFAULT VALUES"); err != nil {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusCreated)
}
