package frameworks

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/idemkit/idem/server"
)

// newGorillaAPI serves POST /v1/accounts/{id}/payments on gorilla/mux,
// which sets no r.Pattern: Route gives the template it matched.
func newGorillaAPI(store server.Store) http.Handler {
	pay := server.Middleware(store, server.Config{
		Route: func(r *http.Request) string {
			t, _ := mux.CurrentRoute(r).GetPathTemplate()
			return r.Method + " " + t
		},
		Scope: func(r *http.Request) (string, string) { return r.Header.Get("X-Tenant"), r.Header.Get("X-User") },
	})
	r := mux.NewRouter()
	r.Handle("/v1/accounts/{id}/payments", pay(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.SetPathValue("id", mux.Vars(r)["id"]) // createPayment reads r.PathValue
		createPayment(w, r)
	}))).Methods(http.MethodPost)
	return r
}
