package tour

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// GuideOutbox is docs/outbox.md's outline: the outbox's tables, a
// dispatcher, a message enqueued in a handler's transaction, and a parked
// message re-driven.
func GuideOutbox(ctx context.Context, pool *pgxpool.Pool, mux *http.ServeMux, mw func(http.Handler) http.Handler, ledgerURL string, body []byte) {
	_ = outbox.Migrate(ctx, pool)              // River's tables and the outbox's; idempotent, upgrades in place
	ob, _ := outbox.New(pool, outbox.Config{}) // zero Config: the defaults below
	go ob.Run(ctx)                             // the dispatcher (and relay); or in processes of their own, several at once
	mux.Handle("POST /v1/payments", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := server.Tx(r.Context())
		// ... debit, insert the payment ...
		_, err := ob.Enqueue(r.Context(), tx, outbox.Message{Name: "payment.created",
			Method: "POST", URL: ledgerURL, Body: body}) // sent if and only if tx commits
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // rolls back the payment and the message
		}
	})))
	parked, _ := ob.Parked(ctx, 0, 100) // what it gave up on, with the last response
	_ = ob.Redrive(ctx, parked[0].ID)   // again, same key (ErrPastRetention past the key's retention)
}
