package outbox_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// A message enqueued in the memory outbox (for tests and demos) is
// delivered by its dispatcher with its Idempotency-Key.
func Example() {
	delivered := make(chan struct{})
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println(r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), string(body))
		w.WriteHeader(http.StatusCreated)
	}))
	defer receiver.Close()

	q := outbox.NewMemory(outbox.Config{Observer: outbox.Observer{
		Delivered: func(_ context.Context, d outbox.Delivery) { close(delivered) },
	}})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- q.Run(ctx) }()

	_, err := q.Enqueue(ctx, outbox.Message{
		Name: "payment.created", Method: "POST", URL: receiver.URL + "/hooks",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"payment_id":"pay_123"}`),
		Key:    "pay_123-created",
	})
	if err != nil {
		log.Fatal(err)
	}
	<-delivered
	stop()
	<-done
	// Output: POST /hooks pay_123-created {"payment_id":"pay_123"}
}

// A handler under server.Middleware (Transactional mode, on a
// PostgresStore) enqueues a message in its own transaction: it is sent if
// and only if the payment commits, under a key derived from the request's
// Idempotency-Key. A dispatcher delivers it, here in the same process.
func ExampleOutbox_Enqueue() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if err := outbox.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	ob, err := outbox.New(pool, outbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = ob.Run(ctx) }() // or in processes of their own

	mw := server.Middleware(server.NewPostgresStore(pool), server.Config{})
	http.Handle("POST /v1/payments", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := server.Tx(r.Context())
		// ... debit the account and insert the payment in tx ...
		_, err := ob.Enqueue(r.Context(), tx, outbox.Message{
			Name: "payment.created", Method: "POST", URL: "https://ledger.internal/v1/entries",
			Body: []byte(`{"payment_id":"pay_123"}`),
		})
		if err != nil {
			http.Error(w, "cannot notify", http.StatusInternalServerError) // a 5xx rolls everything back
			return
		}
		w.WriteHeader(http.StatusCreated)
	})))
}

// The key of a message enqueued by a keyed operation, when Message.Key is
// empty: the same for every execution of the operation.
func ExampleDeriveKey() {
	op := server.Operation{Tenant: "acme", Principal: "alice", Route: "POST /v1/payments", Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"}
	fmt.Println(outbox.DeriveKey(op, "payment.created"))
	// Output: ob1-3bd9fe1fdb8d1ae695ee92b032a359b77fd836634a555297a44c2a250c581b2d
}
