package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/idemkit/idem/internal/wire"
)

// ProblemPrefix starts the type URI of this API's own problem documents:
// "urn:payments:problem:insufficient-funds". The idempotency middleware's
// problems (key-missing, key-in-flight, ...) keep their own prefix.
const ProblemPrefix = "urn:payments:problem:"

// maxBodyBytes caps the request bodies the handlers decode.
const maxBodyBytes = 64 << 10

// writeProblem answers with an RFC 9457 problem document.
func writeProblem(w http.ResponseWriter, status int, name, title, detail string) {
	wire.WriteProblem(w, wire.Problem{Type: ProblemPrefix + name, Title: title, Status: status, Detail: detail})
}

// badRequest answers 400 invalid-request: the request itself is refused,
// and the middleware stores nothing, so a corrected retry is processed.
func badRequest(w http.ResponseWriter, detail string) {
	writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid request", detail)
}

// serverError answers for an unexpected error of the API's: 503 while the
// database is unreachable, 500 internal otherwise (see the package
// function serverError).
func (a *api) serverError(w http.ResponseWriter, r *http.Request, err error) {
	serverError(w, r, a.log, err, "the server failed to process the request; retry it (with the same Idempotency-Key, if it had one)")
}

// writeBusinessError answers for an error of a Backend: a refusal (400)
// for a request that cannot apply, 402 for missing funds (a committed
// outcome, stored and replayed), 503 or 500 for anything else (serverError).
func (a *api) writeBusinessError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrUnknownAccount):
		badRequest(w, "account_id names no account of this tenant")
	case errors.Is(err, ErrCurrencyMismatch):
		badRequest(w, currencyDetail(err))
	case errors.Is(err, ErrInsufficientFunds):
		writeProblem(w, http.StatusPaymentRequired, "insufficient-funds", "Insufficient funds",
			"the account's balance does not cover the amount")
	default:
		a.serverError(w, r, err)
	}
}

// writeJSON answers with v as JSON. The handlers' values always encode: a
// failure is a bug, and panics (the middleware answers 500 and rolls back).
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("api: encoding a %T response: %v", v, err))
	}
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
