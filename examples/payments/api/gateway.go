package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/idemkit/idem/internal/wire"
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
//	POST /v1/charges               {"amount_cents", "currency", "description"?}, key required
//	                               -> 201 {"id", "amount_cents", "currency"}; 402 card-declined above the decline limit
//	GET  /v1/charges/by-key/{key}  -> 200 {"idempotency_key", "status": "charged" | "declined", "id"?, "amount_cents", "currency"}
//	                               404 charge-not-found; 409 charge-in-progress (Retry-After: 1)
//	GET  /v1/charges               -> 200 {"charges": N, "amount_cents": total}
//
// GET /v1/charges/by-key/{key} is the lookup a reconciler makes (see
// ReconcileRoutes), as real gateways offer one: what became of the charge
// requested under that Idempotency-Key. 404 means that no charge under the
// key was made or declined, and none is being processed: a request that
// the gateway refused (400) leaves nothing either. 409 means that a request
// under the key has arrived (its headers at least) and has not been
// answered yet, so its outcome cannot be told.
//
// Its charges and outcomes live in memory, for its lifetime. It is safe for
// concurrent use.
type Gateway struct {
	handler     http.Handler
	declineOver int64

	mu       sync.Mutex
	charges  int
	total    int64
	outcomes map[string]gatewayOutcome // by Idempotency-Key: each charge made or declined
	running  map[string]int            // requests under each key not answered yet
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

// The statuses of a gatewayOutcome.
const (
	outcomeCharged  = "charged"
	outcomeDeclined = "declined"
)

// gatewayOutcome is the body of the gateway's GET
// /v1/charges/by-key/{key}: what became of the charge requested under key.
type gatewayOutcome struct {
	Key         string `json:"idempotency_key"`
	Status      string `json:"status"`       // outcomeCharged or outcomeDeclined
	ID          string `json:"id,omitempty"` // the charge's id, when charged
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
	g := &Gateway{declineOver: cfg.DeclineOverCents, outcomes: map[string]gatewayOutcome{}, running: map[string]int{}}
	if g.declineOver == 0 {
		g.declineOver = DefaultDeclineOverCents
	}
	if cfg.Store == nil {
		cfg.Store = server.NewMemoryStore()
	}
	idempotent := server.Middleware(cfg.Store, server.Config{Logger: cfg.Logger, MaxRequestBytes: maxBodyBytes})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/charges", g.track(idempotent(http.HandlerFunc(g.charge))))
	mux.HandleFunc("GET /v1/charges/by-key/{key}", g.lookup)
	mux.HandleFunc("GET /v1/charges", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, g.Stats()) })
	g.handler = problemMux(mux)
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

// charge charges the card, or declines it above the limit: it checks the
// request, then records the outcome under the key (and counts a charge) as
// its last step (the middleware runs it once per key; a refused request,
// 400, records nothing).
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
	}
	op, _ := server.OperationFrom(r.Context())
	out := gatewayOutcome{Key: op.Key, Status: outcomeDeclined, AmountCents: in.AmountCents, Currency: in.Currency}
	if in.AmountCents <= g.declineOver {
		out.Status, out.ID = outcomeCharged, newID("gwch_")
	}
	g.mu.Lock()
	g.outcomes[op.Key] = out
	if out.Status == outcomeCharged {
		g.charges++
		g.total += in.AmountCents
	}
	g.mu.Unlock()
	if out.Status == outcomeDeclined {
		writeProblem(w, http.StatusPaymentRequired, "card-declined", "Card declined", "the issuer declined the charge")
		return
	}
	writeJSON(w, http.StatusCreated, gatewayCharge{ID: out.ID, AmountCents: in.AmountCents, Currency: in.Currency})
}

// track counts a POST /v1/charges under its key as running from the
// moment its headers arrived until it was answered (replays included), so
// that a lookup meanwhile answers 409 charge-in-progress rather than 404.
func (g *Gateway) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := wire.ParseKey(r.Header.Get(wire.HeaderKey))
		if err != nil { // refused by the middleware: nothing runs
			next.ServeHTTP(w, r)
			return
		}
		g.mu.Lock()
		g.running[key]++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.running[key]--; g.running[key] == 0 {
				delete(g.running, key)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// lookup answers GET /v1/charges/by-key/{key}: the outcome of the charge
// requested under key, 409 while a request under it runs, else 404.
func (g *Gateway) lookup(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	g.mu.Lock()
	out, found := g.outcomes[key]
	busy := g.running[key] > 0
	g.mu.Unlock()
	switch {
	case busy:
		w.Header().Set(wire.HeaderRetryAfter, "1")
		writeProblem(w, http.StatusConflict, "charge-in-progress", "Charge in progress",
			"a charge under this idempotency key is being processed; look it up again later")
	case !found:
		writeProblem(w, http.StatusNotFound, "charge-not-found", "No charge",
			"no charge under this idempotency key was made, declined or is being processed")
	default:
		writeJSON(w, http.StatusOK, out)
	}
}
