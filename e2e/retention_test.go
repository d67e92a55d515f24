package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/testserver"
)

// TestRetention: a retry after the retention period executes the payment
// again, as the contract says (clients must not retry for longer than the
// retention); a retry inside it replays. Two nodes on one database differ
// only in their retention (1 s and 1 h); each makes one payment, and both
// payments are retried at the same moment, after the short retention has
// passed by the database clock.
func TestRetention(t *testing.T) {
	seed := testserver.Seed(t)
	db := openDatabase(t, pgtest.SchemaURL(t))
	short := startNodes(t, db.url, 1, api.Config{Retention: time.Second})
	long := startNodes(t, db.url, 1, api.Config{Retention: time.Hour})
	ops := workload(seed, 2)
	ops[0].account, ops[1].account, ops[0].want, ops[1].want = fundedAccount(0), fundedAccount(1), 201, 201
	payers := []*payer{
		newPayer(short.servers[0].URL, clientConfig(5*time.Second), 10*time.Second, 0),
		newPayer(long.servers[0].URL, clientConfig(5*time.Second), 10*time.Second, 0),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pay := func() (shortV, longV verdict) { return payers[0].pay(ctx, ops[0]), payers[1].pay(ctx, ops[1]) }

	shortFirst, longFirst := pay()
	for _, v := range []verdict{shortFirst, longFirst} {
		require.Equal(t, testserver.OutcomeOK, v.kind, "the first payment: %v", v.err)
		require.False(t, v.replayed, "the first payment was replayed")
	}
	waitExpired(ctx, t, db, ops[0].key)
	shortAgain, longAgain := pay()

	require.Equal(t, testserver.OutcomeOK, shortAgain.kind, "the retry after the retention: %v", shortAgain.err)
	assert.False(t, shortAgain.replayed, "the retry after the retention was replayed, want executed again")
	assert.NotEqual(t, shortFirst.result, shortAgain.result, "the retry after the retention, want a new payment")
	require.Equal(t, testserver.OutcomeOK, longAgain.kind, "the retry inside the retention: %v", longAgain.err)
	assert.True(t, longAgain.replayed, "the retry inside the retention, want a replay")
	assert.Equal(t, longFirst.result, longAgain.result, "the retry inside the retention, want the first payment")

	payments := db.payments(t)
	effects := map[string]int{}
	for _, p := range payments {
		effects[p.Key]++
	}
	assert.Equal(t, map[string]int{ops[0].key: 2, ops[1].key: 1}, effects, "payments by key")
	db.requireConsistent(t, ops, payments)
}

// waitExpired waits until the database clock has passed the expiry of the
// idempotency record of key, polling the database (bounded by ctx).
//
// The test cannot inject the clock: the expiry is set and judged by
// PostgreSQL's clock (statement_timestamp() in the store's statements), in
// another process, and the store's own clock offset is private to package
// server's tests, behind api.New here. So the test waits for the real
// database clock, asking the database, rather than sleeping for a guessed
// time.
func waitExpired(ctx context.Context, t *testing.T, db *database, key string) {
	t.Helper()
	const sql = `SELECT expires_at <= statement_timestamp() FROM idem_records WHERE idem_key = $1`
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		var expired bool
		require.NoError(t, db.pool.QueryRow(ctx, sql, key).Scan(&expired), "the record of %s", key)
		if expired {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the record of %s did not expire by the database clock: %v", key, ctx.Err())
		case <-poll.C:
		}
	}
}
