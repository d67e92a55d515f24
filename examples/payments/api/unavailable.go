package api

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idem/internal/wire"
)

// serverError answers for an error that is neither the request's fault nor
// a business outcome: 503 store-unavailable (Retry-After: 1) while the
// database cannot be reached, as during a failover, and 500 internal for
// anything else, with detail500 as its detail. The error goes to the log
// only: it may name internals (a database host, a connection string).
// Either way the middleware rolls back (or ends the lease), and a retry
// with the same Idempotency-Key is safe.
func serverError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, detail500 string) {
	if unreachable(err) {
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

// unreachable reports whether err says that the database could not be
// reached, or was lost, or cannot take writes now: a failed connection
// attempt, a connection that broke or closed, or a server that shuts
// down, is starting, is out of connections or is a standby in recovery
// (SQLSTATE class 08, 57P01 to 57P03, 53300, 25006). Such an error ends
// when the database (or the failover) is back, so the client should
// retry.
func unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "53300", "25006":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
