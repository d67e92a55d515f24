// Package gofiber is a minimal payments API built on gofiber's idempotency
// middleware (github.com/gofiber/fiber/v2/middleware/idempotency, v2.52),
// as its documentation mounts it: the server that idemcheck's tests judge,
// so that the verdicts the README lists for gofiber are asserted in CI.
//
// It is a module of its own, so that fiber stays out of the root module's
// go.mod; its go.mod names idemcheck as a tool, which keeps idemcheck's
// dependencies in this module's graph for the tests that build it.
package gofiber

import (
	"fmt"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/idempotency"
)

// payment is the body of POST /v1/payments.
type payment struct {
	AccountID   string `json:"account_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Reference   string `json:"reference"`
}

// ledger holds the payments made, counted by account.
type ledger struct {
	mu     sync.Mutex
	n      int
	counts map[string]int
}

// New returns the app: POST /v1/payments (a key in X-Idempotency-Key,
// the middleware's default header; the caller authenticates with
// "Authorization: Bearer <principal>") answers 201 with the new payment,
// and GET /v1/accounts/:id answers the account's payment_count.
func New() *fiber.App {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	l := &ledger{counts: map[string]int{}}
	app.Use(idempotency.New())
	app.Post("/v1/payments", l.pay)
	app.Get("/v1/accounts/:id", l.account)
	return app
}

// pay makes a payment.
func (l *ledger) pay(c *fiber.Ctx) error {
	principal, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
	if !ok || principal == "" {
		return fiber.NewError(fiber.StatusUnauthorized, "unauthenticated")
	}
	var p payment
	if err := c.BodyParser(&p); err != nil || p.AccountID == "" || p.AmountCents <= 0 {
		return fiber.NewError(fiber.StatusBadRequest, "a payment needs an account_id and a positive amount_cents")
	}
	l.mu.Lock()
	l.n++
	id := fmt.Sprintf("pay_%d", l.n)
	l.counts[p.AccountID]++
	l.mu.Unlock()
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{
		"payment_id": id, "account_id": p.AccountID, "amount_cents": p.AmountCents,
		"currency": p.Currency, "reference": p.Reference, "created_by": principal,
	})
}

// account answers an account's payment count.
func (l *ledger) account(c *fiber.Ctx) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return c.JSON(fiber.Map{"account_id": c.Params("id"), "payment_count": l.counts[c.Params("id")]})
}
