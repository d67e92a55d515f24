package tour

import (
	"net/http"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// Notify is a handler for server.Middleware whose message to the ledger is
// sent if and only if the handler's transaction commits. ob comes from
// outbox.New(pool, outbox.Config{}), after outbox.Migrate made its tables
// and River's; ob.Run(ctx) delivers (or run dispatchers in processes of their own).
func Notify(ob *outbox.Outbox, ledgerURL string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tx, _ := server.Tx(r.Context()) // the operation's transaction, its own writes included
		_, err := ob.Enqueue(r.Context(), tx, outbox.Message{Name: "payment.created", Method: "POST",
			URL: ledgerURL, Body: []byte(`{"amount_cents":100}`)}) // one Idempotency-Key for every delivery
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // rolls back its writes and the message
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}
}
