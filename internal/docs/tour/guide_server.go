package tour

import (
	"context"
	"log"
	"net/http"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/docs/tour/mystore"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// GuideMounting is docs/server.md's "Mounting": a Transactional route and a
// Leased one over one Postgres store, and the store's sweeper.
func GuideMounting(ctx context.Context, mux *http.ServeMux, createPayment, createCharge func(http.ResponseWriter, *http.Request)) {
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err := server.Migrate(ctx, pool); err != nil { // idempotent; or apply server.Schema() yourself
		log.Fatal(err)
	}
	store := server.NewPostgresStore(pool) // or server.NewMemoryStore()
	payments := server.Middleware(store, server.Config{Scope: tenantAndUser})
	mux.Handle("POST /v1/payments", payments(http.HandlerFunc(createPayment))) // server.Tx(ctx): the handler's transaction
	charges := server.Middleware(store, server.Config{Scope: tenantAndUser, Mode: server.Leased})
	mux.Handle("POST /v1/charges", charges(http.HandlerFunc(createCharge))) // server.LeaseFrom(ctx): Checkpoint, Extend, Recovery
	go server.RunSweeper(ctx, store, server.SweepConfig{})
}

// TestConformance is docs/server.md's "A store of your own": the
// conformance suite on a store of the reader's (mystore stands for it).
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, clock *storetest.Clock) server.Store {
			return mystore.New(freshNamespace(t), clock.Offset) // judge time by your clock plus clock.Offset()
		},
	})
}

// freshNamespace stands for a namespace of the reader's store that no
// other test uses.
func freshNamespace(t *testing.T) string { return t.Name() }
