package frameworks

import (
	"encoding/json"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idem/server"
)

// newChiAPI serves POST /v1/accounts/{id}/payments on chi, which sets
// r.Pattern (v5.2 and later): the net/http middleware needs no Route.
func newChiAPI(store server.Store) http.Handler {
	pay := server.Middleware(store, server.Config{
		Scope: func(r *http.Request) (string, string) { return r.Header.Get("X-Tenant"), r.Header.Get("X-User") },
	})
	r := chi.NewRouter()
	r.With(pay).Post("/v1/accounts/{id}/payments", createPayment)
	return r
}

// createPayment is a net/http handler that makes one payment in the
// request's transaction.
func createPayment(w http.ResponseWriter, r *http.Request) {
	tx, _ := server.Tx(r.Context()) // the claim's transaction
	var id int64
	err := tx.QueryRow(r.Context(), `INSERT INTO payments (account) VALUES ($1) RETURNING id`, r.PathValue("id")).Scan(&id)
	if err != nil {
		http.Error(w, "try again", http.StatusServiceUnavailable) // rolled back, not stored
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]int64{"payment_id": id})
}
