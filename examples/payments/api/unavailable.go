package api

import (
	"log/slog"
	"net/http"

	"github.com/idemkit/idem/internal/dberr"
	"github.com/idemkit/idem/internal/wire"
)

// serverError answers for an error that is neither the request's fault nor
// a business outcome: 503 store-unavailable (Retry-After: 1) while the
// database cannot be reached (dberr.Unreachable), as during a failover,
// and 500 internal for anything else, with detail500 as its detail. The error goes to the log
// only: it may name internals (a database host, a connection string).
// Either way the middleware rolls back (or ends the lease), and a retry
// with the same Idempotency-Key is safe.
func serverError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, detail500 string) {
	if dberr.Unreachable(err) {
		log.WarnContext(r.Context(), "payments API: database unreachable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set(wire.HeaderRetryAfter, "1")
		wire.WriteProblem(w, wire.Problem{Type: ProblemPrefix + "store-unavailable", Title: "Store unavailable",
			Status: http.StatusServiceUnavailable, RetryAfter: 1,
			Detail: "the payments database cannot be reached; retry after Retry-After seconds (with the same Idempotency-Key, if the request had one)"})
		return
	}
	log.ErrorContext(r.Context(), "payments API: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	writeProblem(w, http.StatusInternalServerError, "internal", "Internal error", detail500)
}
