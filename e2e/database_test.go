package e2e

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/testserver"
)

// database is where a run's effects land, seen through a pool of the
// test's own (not a node's): the schema, the accounts, and afterwards the
// ground truth.
type database struct {
	url  string
	pool *pgxpool.Pool
}

// openDatabase applies the payments schema at dbURL and creates the
// accounts of initialBalances.
func openDatabase(t *testing.T, dbURL string) *database {
	t.Helper()
	d := &database{url: dbURL, pool: pgtest.NewPool(t, withParams(t, dbURL, map[string]string{"application_name": "e2e-test"}))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, api.Migrate(ctx, d.pool))
	backend := api.NewPostgresBackend(d.pool)
	for id, balance := range initialBalances() {
		_, err := backend.PutAccount(ctx, tenant, id, "EUR", balance)
		require.NoError(t, err)
	}
	return d
}

// withParams returns dbURL with the query parameters set (pgx reads
// application_name, pool_max_conns and the like from the URL).
func withParams(t *testing.T, dbURL string, params map[string]string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// payments reads every payment of the tenant: the effects.
func (d *database) payments(t *testing.T) []api.Payment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := api.NewPostgresBackend(d.pool).Payments(ctx, tenant)
	require.NoError(t, err)
	return out
}

// charges reads every charge of the tenant (the charges table of
// POST /v1/charges, which api.Backend does not list), oldest first.
func (d *database) charges(t *testing.T) []api.Charge {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := d.pool.Query(ctx, `
SELECT id, account_id, amount_cents, currency, balance_cents, gateway_charge_id, coalesce(idempotency_key, '')
FROM charges WHERE tenant = $1 ORDER BY created_at, id`, tenant)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (api.Charge, error) {
		c := api.Charge{Tenant: tenant}
		err := row.Scan(&c.ID, &c.AccountID, &c.AmountCents, &c.Currency, &c.BalanceCents, &c.GatewayChargeID, &c.Key)
		return c, err
	})
	require.NoError(t, err)
	return out
}

// ledger records every payment as an effect of the operation whose key it
// was made under: the ground truth for testserver.Check.
func ledger(payments []api.Payment) *testserver.Ledger {
	var l testserver.Ledger
	for _, p := range payments {
		l.Record(p.Key, p.ID)
	}
	return &l
}

// requireConsistent checks that the database holds no partial state: each
// account's balance is its initial balance less the payments made from it,
// and each payment moved what its operation asked for, from its account.
func (d *database) requireConsistent(t *testing.T, ops []operation, payments []api.Payment) {
	t.Helper()
	byKey := make(map[string]operation, len(ops))
	for _, op := range ops {
		byKey[op.key] = op
	}
	want := initialBalances()
	for _, p := range payments {
		want[p.AccountID] -= p.AmountCents
		if op, ok := byKey[p.Key]; ok && (op.account != p.AccountID || op.amount != p.AmountCents) {
			t.Errorf("payment %s of %s: %d from %s, want %d from %s", p.ID, p.Key, p.AmountCents, p.AccountID, op.amount, op.account)
		}
	}
	require.Equal(t, want, d.balances(t), "account balances, want the initial balances less the payments")
}

// balances reads every account's balance.
func (d *database) balances(t *testing.T) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := d.pool.Query(ctx, `SELECT id, balance_cents FROM accounts WHERE tenant = $1`, tenant)
	require.NoError(t, err)
	out := map[string]int64{}
	var id string
	var balance int64
	_, err = pgx.ForEachRow(rows, []any{&id, &balance}, func() error { out[id] = balance; return nil })
	require.NoError(t, err)
	return out
}
