package tour

import (
	"context"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/testserver"
)

// TestMain runs the tests under pgtest.Main, which says in one line how
// many Postgres tests skipped.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// dropFirst loses the first response of every key, after the handler ran.
var dropFirst = testserver.Config{Rules: []testserver.Rule{
	{Script: []testserver.Fault{{Kind: testserver.FaultDropReset}}},
}}

// paymentsDB returns a pool on a fresh schema with the payments table.
func paymentsDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.Pool(t)
	_, err := pool.Exec(t.Context(), `CREATE TABLE payments (id bigserial PRIMARY KEY, made_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	return pool
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n))
	return n
}

// post sends one keyed POST with the scope's headers and no retries, and
// returns its status and whether it was a replay.
func post(t *testing.T, url, key, tenant string) (int, bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/v1/payments", nil)
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Tenant", tenant)
	req.Header.Set("X-User", "alice")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true"
}

// pay makes a payment with Pay under key, which must get a 201, and says
// whether it was a replay.
func pay(t *testing.T, url, key string) bool {
	t.Helper()
	resp, err := Pay(idem.WithKey(t.Context(), key), url, []byte(`{"amount_cents":1250}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	return resp.Header.Get("Idempotent-Replayed") == "true"
}

// The README's server: the retry of a lost response replays the payment,
// as does a resend with the key, and the same key in another scope is
// another payment.
func TestRoutes(t *testing.T) {
	pool := paymentsDB(t)
	h, err := Routes(t.Context(), pool)
	require.NoError(t, err)
	srv := testserver.New(h, dropFirst)
	defer srv.Close()

	key := idem.NewKey()
	assert.True(t, pay(t, srv.URL, key), "the retry after the lost response is a replay")
	assert.Equal(t, 1, count(t, pool), "payments after one payment whose first response was lost")
	assert.True(t, pay(t, srv.URL, key), "a resend with the key replays")
	assert.Equal(t, 1, count(t, pool))

	direct := testserver.New(h, testserver.Config{})
	defer direct.Close()
	other := idem.NewKey()
	s1, r1 := post(t, direct.URL, other, "acme")
	s2, r2 := post(t, direct.URL, other, "globex")
	s3, r3 := post(t, direct.URL, other, "acme")
	assert.Equal(t, []int{201, 201, 201}, []int{s1, s2, s3})
	assert.Equal(t, []bool{false, false, true}, []bool{r1, r2, r3}, "one key in two tenants: two payments, then a replay")
	assert.Equal(t, 3, count(t, pool))
}

// The README's outbox: a request whose first response was lost enqueues
// its message once, delivered to the ledger under the key derived from
// the request's operation.
func TestNotify(t *testing.T) {
	pool := pgtest.Pool(t)
	got := make(chan string, 8)
	ledger := testserver.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Idempotency-Key")
		w.WriteHeader(http.StatusCreated)
	}), testserver.Config{})
	defer ledger.Close()
	require.NoError(t, server.Migrate(t.Context(), pool))
	require.NoError(t, outbox.Migrate(t.Context(), pool))
	delivered := make(chan outbox.Delivery, 8)
	ob, err := outbox.New(pool, outbox.Config{Observer: outbox.Observer{
		Delivered: func(_ context.Context, d outbox.Delivery) { delivered <- d },
	}})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()
	defer func() { stop(); require.NoError(t, <-done) }()

	mux := http.NewServeMux()
	mw := server.Middleware(server.NewPostgresStore(pool), server.Config{})
	mux.Handle("POST /v1/payments", mw(Notify(ob, ledger.URL+"/v1/ledger")))
	srv := testserver.New(mux, dropFirst)
	defer srv.Close()

	key := idem.NewKey()
	resp, err := Pay(idem.WithKey(t.Context(), key), srv.URL, nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	want := outbox.DeriveKey(server.Operation{Route: "POST /v1/payments", Key: key}, "payment.created")
	select {
	case <-delivered:
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not delivered within 30 s")
	}
	require.Len(t, got, 1, "requests at the ledger")
	assert.Equal(t, want, <-got)
	assert.Empty(t, delivered, "a second delivery")
}
