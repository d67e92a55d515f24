package api

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
)

// Without a Store, a PostgresBackend keeps the idempotency records in its
// database too: a retry after a restart is replayed, not paid again.
func TestNilStoreWithPostgresBackendSurvivesARestart(t *testing.T) {
	pool := pgtest.Pool(t)
	require.NoError(t, Migrate(context.Background(), pool))
	first := New(Config{Backend: NewPostgresBackend(pool), Logger: quietLogger()})
	putAccount(t, first, "acc-1", 10000)
	rec := do(t, first, call{method: "POST", path: "/v1/payments", key: "k-restart", body: pay2500})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())

	restarted := New(Config{Backend: NewPostgresBackend(pool), Logger: quietLogger()})
	retry := do(t, restarted, call{method: "POST", path: "/v1/payments", key: "k-restart", body: pay2500})
	assert.Equal(t, http.StatusCreated, retry.Code, retry.Body.String())
	assert.Equal(t, "true", retry.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int64(7500), getAccount(t, restarted, "acc-1").BalanceCents, "paid once")
}

// notAPool has the methods of DB but not those of server.DB.
type notAPool struct{ DB }

// New refuses a PostgresBackend without a Store when it cannot put the
// records on the backend's database: it never falls back to memory.
func TestNilStoreWithPostgresBackendOnAnotherDB(t *testing.T) {
	assert.PanicsWithValue(t,
		"api: Config.Store is nil and the PostgresBackend's DB (a api.notAPool) is not a server.DB: "+
			"set Config.Store to a server.PostgresStore on the same database",
		func() { New(Config{Backend: NewPostgresBackend(notAPool{})}) })
}

// Migrate and MigrateReceiver on tables that are up to date wait for no
// transaction: a node starts while another holds a payment, a charge and a
// notification in flight (or is stalled in them).
func TestMigrateWaitsForNoTransactionInFlight(t *testing.T) {
	url := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, url)
	ctx := context.Background()
	require.NoError(t, Migrate(ctx, pool))
	require.NoError(t, MigrateReceiver(ctx, pool))
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for _, stmt := range []string{
		`INSERT INTO accounts (tenant, id, currency, balance_cents) VALUES ('t', 'acc', 'EUR', 100)`,
		`INSERT INTO payments (id, tenant, account_id, amount_cents, currency, balance_cents) VALUES ('p', 't', 'acc', 1, 'EUR', 99)`,
		`INSERT INTO charges (id, tenant, account_id, amount_cents, currency, balance_cents, gateway_charge_id) VALUES ('c', 't', 'acc', 1, 'EUR', 100, 'g')`,
		`INSERT INTO payment_notifications (idempotency_key, event, payment_id, tenant, amount_cents) VALUES ('k', 'payment.created', 'p', 't', 1)`,
	} {
		_, err = tx.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}

	// lock_timeout makes a wait an error instead of a hang.
	other := pgtest.NewPool(t, url+"&lock_timeout=5s")
	require.NoError(t, Migrate(ctx, other))
	require.NoError(t, MigrateReceiver(ctx, other))
}
