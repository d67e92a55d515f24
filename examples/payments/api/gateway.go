package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/idemkit/idem/server"
)

// DefaultDeclineOverCents is the amount above which the fake gateway
// declines a charge (10 000.00).
const DefaultDeclineOverCents = 1_000_000

// GatewayConfig configures a Gateway. Its zero value keeps the gateway's
// idempotency records in memory and declines charges above
// DefaultDeclineOverCents.
type GatewayConfig struct {
	// Store keeps the gateway's idempotency records. Nil: a new
	// server.MemoryStore.
	Store server.Store
	// DeclineOverCents declines larger charges with 402 card-declined.
	// Zero: DefaultDeclineOverCents.
	DeclineOverCents int64
	// Logger receives the middleware's records. Nil: slog.Default().
	Logger *slog.Logger
}

// Gateway is a fake card gateway, the downstream service of POST
// /v1/charges. It is itself built on package server: it charges "the
// card" once per Idempotency-Key and replays the stored response to every
// retry, as real gateways (Stripe, Adyen) do.
//
//	POST /v1/charges  {"amount_cents", "currency", "description"?}, key required -> 201 {"id", "amount_cents", "currency"}
//	                  402 card-declined above the decline limit
//	GET  /v1/charges  -> 200 {"charges": N, "amount_cents": total}
//
// Its charges live in memory. It is safe for concurrent use.
type Gateway struct {
	handler     http.Handler
	declineOver int64

	mu      sync.Mutex
	charges int
	total   int64
}

// gatewayRequest is the body of the gateway's POST /v1/charges.
type gatewayRequest struct {
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Description string `json:"description,omitempty"`
}

// gatewayCharge is the gateway's 201 body.
type gatewayCharge struct {
	ID          string `json:"id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// GatewayStats is the body of the gateway's GET /v1/charges.
type GatewayStats struct {
	Charges     int   `json:"charges"`
	AmountCents int64 `json:"amount_cents"`
}

// NewGateway returns a Gateway configured by cfg.
func NewGateway(cfg GatewayConfig) *Gateway {
	g := &Gateway{declineOver: cfg.DeclineOverCents}
	if g.declineOver == 0 {
		g.declineOver = DefaultDeclineOverCents
	}
	if cfg.Store == nil {
		cfg.Store = server.NewMemoryStore()
	}
	idempotent := server.Middleware(cfg.Store, server.Config{Logger: cfg.Logger, MaxRequestBytes: maxBodyBytes})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/charges", idempotent(http.HandlerFunc(g.charge)))
	mux.HandleFunc("GET /v1/charges", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, g.Stats()) })
	g.handler = mux
	return g
}

// ServeHTTP serves the gateway's routes.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.handler.ServeHTTP(w, r) }

// Stats returns how many charges the gateway made, and their total.
func (g *Gateway) Stats() GatewayStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return GatewayStats{Charges: g.charges, AmountCents: g.total}
}

// charge charges the card: it checks everything, then counts the charge,
// as its last step (the middleware runs it once per key).
func (g *Gateway) charge(w http.ResponseWriter, r *http.Request) {
	var in gatewayRequest
	if !decodeJSON(w, r, &in) {
		return
	}
	switch {
	case in.AmountCents <= 0 || in.AmountCents > maxAmountCents:
		badRequest(w, fmt.Sprintf("amount_cents must be from 1 to %d", int64(maxAmountCents)))
		return
	case !currencies[in.Currency]:
		badRequest(w, fmt.Sprintf("unknown currency %q", in.Currency))
		return
	case in.AmountCents > g.declineOver:
		writeProblem(w, http.StatusPaymentRequired, "card-declined", "Card declined", "the issuer declined the charge")
		return
	}
	g.mu.Lock()
	g.charges++
	g.total += in.AmountCents
	g.mu.Unlock()
	writeJSON(w, http.StatusCreated, gatewayCharge{ID: newID("gwch_"), AmountCents: in.AmountCents, Currency: in.Currency})
}
