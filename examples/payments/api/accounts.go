package api

import (
	"errors"
	"fmt"
	"net/http"
)

// currencies are the ISO 4217 codes the API accepts.
var currencies = map[string]bool{
	"EUR": true, "USD": true, "GBP": true, "CHF": true, "JPY": true, "CAD": true,
	"AUD": true, "SEK": true, "NOK": true, "DKK": true, "PLN": true, "CZK": true,
}

// maxAmountCents bounds amounts and balances (ten billion in major units),
// far from int64 overflow.
const maxAmountCents = 1_000_000_000_000

// defaultCurrency is the currency of an account created without one.
const defaultCurrency = "EUR"

// putAccountBody is the body of PUT /v1/accounts/{id}.
type putAccountBody struct {
	BalanceCents *int64 `json:"balance_cents"`
	// Currency "" keeps an existing account's currency, and gives a new
	// account defaultCurrency.
	Currency string `json:"currency"`
}

// putAccount creates the account or sets its balance. An account's
// currency never changes: a PUT without one keeps it, a PUT with another
// one is refused with 409 currency-conflict and changes nothing (the
// balance is in the account's currency). PUT is idempotent: a retry sets
// the same values.
func (a *api) putAccount(w http.ResponseWriter, r *http.Request) {
	c, _ := callerFrom(r.Context())
	id := r.PathValue("id")
	var body putAccountBody
	if !decodeJSON(w, r, &body) {
		return
	}
	switch {
	case !validID(id):
		badRequest(w, "the account id must be 1 to 64 characters of A-Z a-z 0-9 . _ -")
	case body.BalanceCents == nil || *body.BalanceCents < 0 || *body.BalanceCents > maxAmountCents:
		badRequest(w, fmt.Sprintf("balance_cents must be given, from 0 to %d", int64(maxAmountCents)))
	case body.Currency != "" && !currencies[body.Currency]:
		badRequest(w, fmt.Sprintf("unknown currency %q", body.Currency))
	default:
		acct, err := a.backend.PutAccount(r.Context(), c.Tenant, id, body.Currency, *body.BalanceCents)
		switch {
		case errors.Is(err, ErrCurrencyMismatch):
			writeProblem(w, http.StatusConflict, "currency-conflict", "Currency conflict",
				currencyDetail(err)+"; an account's currency never changes: omit currency or send the account's")
		case err != nil:
			a.serverError(w, r, err)
		default:
			writeJSON(w, http.StatusOK, acct)
		}
	}
}

// getAccount shows the account with its balance and payment count.
func (a *api) getAccount(w http.ResponseWriter, r *http.Request) {
	c, _ := callerFrom(r.Context())
	acct, err := a.backend.Account(r.Context(), c.Tenant, r.PathValue("id"))
	switch {
	case errors.Is(err, ErrUnknownAccount):
		writeProblem(w, http.StatusNotFound, "not-found", "Not found", "no account of this tenant has this id")
	case err != nil:
		a.serverError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, acct)
	}
}
