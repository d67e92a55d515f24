package api

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
)

// The business errors of a Backend. The handlers turn them into problem
// documents: ErrUnknownAccount and ErrCurrencyMismatch into 400 (a refusal
// of the request, nothing stored), ErrInsufficientFunds into 402 (the
// operation's own outcome, stored and replayed like a 201). A PUT of an
// account in another currency than its own is 409 currency-conflict, and
// any of them after the card gateway charged a card is a 500 (see
// POST /v1/charges).
var (
	ErrUnknownAccount    = errors.New("api: unknown account")
	ErrCurrencyMismatch  = errors.New("api: currency differs from the account's")
	ErrInsufficientFunds = errors.New("api: insufficient funds")
)

// Account is an account as GET /v1/accounts/{id} shows it. Accounts belong
// to a tenant: another tenant never sees them.
type Account struct {
	ID           string `json:"id"`
	Currency     string `json:"currency"`
	BalanceCents int64  `json:"balance_cents"`
	PaymentCount int64  `json:"payment_count"`
}

// Payment is a debit of an account, and the body of the 201 that
// POST /v1/payments answers.
type Payment struct {
	ID          string `json:"payment_id"`
	AccountID   string `json:"account_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	// BalanceCents is the account's balance right after this payment.
	BalanceCents int64 `json:"balance_cents"`
	// Reference is the client's free label of the payment ("" when none).
	// It is not unique: telling retries apart is the Idempotency-Key's job.
	Reference string `json:"reference,omitempty"`
	// Tenant owns the account; Key is the Idempotency-Key the payment was
	// made under ("" without one). Neither is part of the response.
	Tenant string `json:"-"`
	Key    string `json:"-"`
}

// Charge is a card charge, made at the gateway, that credited an account:
// the body of the 201 that POST /v1/charges answers.
type Charge struct {
	ID          string `json:"charge_id"`
	AccountID   string `json:"account_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	// BalanceCents is the account's balance right after the credit.
	BalanceCents int64 `json:"balance_cents"`
	// GatewayChargeID is the gateway's id of the charge; one gateway charge
	// credits an account at most once.
	GatewayChargeID string `json:"gateway_charge_id"`
	Tenant          string `json:"-"`
	Key             string `json:"-"`
}

// Backend keeps accounts, payments and charges. The package has two:
// MemoryBackend and PostgresBackend. Implementations must be safe for
// concurrent use, and must leave nothing behind when a method returns an
// error. ctx governs each call; with PostgresBackend it also carries the
// idempotency middleware's transaction (server.Tx), which the mutation
// joins.
type Backend interface {
	// PutAccount creates the account in currency (EUR when currency is
	// ""), or sets the existing account's balance. An account's currency
	// never changes: currency "" keeps it, and another currency than the
	// account's returns ErrCurrencyMismatch and changes nothing.
	PutAccount(ctx context.Context, tenant, id, currency string, balanceCents int64) (Account, error)
	// Account returns the account, or ErrUnknownAccount.
	Account(ctx context.Context, tenant, id string) (Account, error)
	// Pay debits p.AmountCents from the account and records the payment
	// (p.ID, p.BalanceCents are filled in). Errors: ErrUnknownAccount,
	// ErrCurrencyMismatch, ErrInsufficientFunds.
	Pay(ctx context.Context, p Payment) (Payment, error)
	// RecordCharge credits the account with a gateway charge and records
	// it, once per c.GatewayChargeID: recording the same gateway charge
	// again returns the charge recorded first and credits nothing.
	// Errors: ErrUnknownAccount, ErrCurrencyMismatch.
	RecordCharge(ctx context.Context, c Charge) (Charge, error)
	// Payments returns every payment of the tenant, oldest first.
	Payments(ctx context.Context, tenant string) ([]Payment, error)
}

// currencyError is an ErrCurrencyMismatch that names both currencies:
// errors.Is(err, ErrCurrencyMismatch) holds for it.
type currencyError struct {
	account, requested string
}

func mismatch(account, requested string) error {
	return &currencyError{account: account, requested: requested}
}

func (e *currencyError) Error() string {
	return fmt.Sprintf("api: currency %s differs from the account's currency, %s", e.requested, e.account)
}

func (e *currencyError) Is(target error) bool { return target == ErrCurrencyMismatch }

// currencyDetail says, in the API's terms, which currencies differ.
func currencyDetail(err error) string {
	var ce *currencyError
	if errors.As(err, &ce) {
		return fmt.Sprintf("the request's currency, %s, differs from the account's currency, %s", ce.requested, ce.account)
	}
	return "the request's currency differs from the account's currency"
}

// newID returns a fresh id with the given prefix: "pay_", "ch_", ...
func newID(prefix string) string {
	return prefix + rand.Text()
}

// checkAccount checks that a payment or a charge in currency may touch an
// account of that currency and balance; debit > 0 also needs the funds.
func checkAccount(accountCurrency string, balance int64, currency string, debit int64) error {
	switch {
	case accountCurrency != currency:
		return mismatch(accountCurrency, currency)
	case debit > balance:
		return ErrInsufficientFunds
	}
	return nil
}
