package api

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// A keyed payment on MySQL makes its writes in the transaction that
// mysqlidem hands the handler: once the handler returned and before the
// middleware commits, another connection sees neither the payment nor
// the debit; after the commit it sees both.
func TestMySQLPaymentJoinsTheClaimsTransaction(t *testing.T) {
	cfg := newConfig(t, "mysql")
	b := cfg.Backend.(*MySQLBackend)
	var seen []int // payments seen by another connection, at Handled
	cfg.Hooks.Handled = func(ctx context.Context, e server.Event) {
		if _, ok := server.SQLTx(ctx); !ok || e.Route != "POST /v1/payments" {
			return
		}
		var n int
		require.NoError(t, b.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM payments`).Scan(&n))
		seen = append(seen, n)
	}
	h := New(cfg)
	putAccount(t, h, "acc-1", 10000)

	rec := do(t, h, call{method: "POST", path: "/v1/payments", key: "k-1", body: pay2500})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	assert.Equal(t, []int{0}, seen, "the payment is not committed before the middleware commits")
	stored, err := b.Payments(context.Background(), "acme")
	require.NoError(t, err)
	assert.Len(t, stored, 1, "committed with the record")
	assert.Equal(t, int64(7500), getAccount(t, h, "acc-1").BalanceCents)
}

// A MySQLBackend without a Store is refused: a memory store beside durable
// payments would pay again after a restart.
func TestMySQLBackendNeedsItsStore(t *testing.T) {
	assert.PanicsWithValue(t, "api: Config.Store is nil and the Backend is a MySQLBackend: "+
		"set Config.Store to a mysqlidem.Store on the same database",
		func() { New(Config{Backend: NewMySQLBackend(nil)}) })
}
