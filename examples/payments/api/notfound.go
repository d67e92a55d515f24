package api

import (
	"net/http"
	"strings"
)

// problemMux serves mux, and answers the requests that mux routes nowhere
// with problem documents, as every other error of the API: 404 not-found,
// and 405 method-not-allowed with the Allow header that ServeMux computes.
func problemMux(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" { // routed, or redirected to a canonical path
			mux.ServeHTTP(w, r)
			return
		}
		rec := &recorder{}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			allow := rec.Header().Get("Allow")
			w.Header().Set("Allow", allow)
			writeProblem(w, http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed",
				r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+strings.ReplaceAll(allow, ",", ", "))
			return
		}
		writeProblem(w, http.StatusNotFound, "not-found", "Not found", "no route of this API matches "+r.URL.Path)
	})
}
