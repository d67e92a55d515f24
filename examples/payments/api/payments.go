package api

import (
	"fmt"
	"net/http"

	"github.com/idemkit/idem/internal/wire"
)

// amountBody is the body of POST /v1/charges, and the part of POST
// /v1/payments that says what moves.
type amountBody struct {
	AccountID   string `json:"account_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// validate returns what is wrong with the body, "" when nothing is.
func (b amountBody) validate() string {
	switch {
	case !validID(b.AccountID):
		return "account_id must be 1 to 64 characters of A-Z a-z 0-9 . _ -"
	case b.AmountCents <= 0 || b.AmountCents > maxAmountCents:
		return fmt.Sprintf("amount_cents must be from 1 to %d", int64(maxAmountCents))
	case !currencies[b.Currency]:
		return fmt.Sprintf("unknown currency %q", b.Currency)
	}
	return ""
}

// paymentBody is the body of POST /v1/payments.
type paymentBody struct {
	amountBody
	// Reference is the client's label of the payment, at most 128 bytes.
	Reference string `json:"reference,omitempty"`
}

func (b paymentBody) validate() string {
	if len(b.Reference) > 128 {
		return "reference must be at most 128 bytes"
	}
	return b.amountBody.validate()
}

// createPayment debits the account and records the payment. Behind the
// Transactional middleware, with PostgresBackend both happen in the
// middleware's transaction and commit with the stored 201 (or 402).
func (a *api) createPayment(w http.ResponseWriter, r *http.Request) {
	c, _ := callerFrom(r.Context())
	var body paymentBody
	if !decodeJSON(w, r, &body) {
		return
	}
	if problem := body.validate(); problem != "" {
		badRequest(w, problem)
		return
	}
	key, _ := wire.ParseKey(r.Header.Get(wire.HeaderKey)) // "" when the request has none
	p, err := a.backend.Pay(r.Context(), Payment{
		Tenant: c.Tenant, Key: key, AccountID: body.AccountID,
		AmountCents: body.AmountCents, Currency: body.Currency, Reference: body.Reference,
	})
	if err != nil {
		a.writeBusinessError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, p)
}
