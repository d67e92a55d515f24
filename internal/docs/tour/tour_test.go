package tour

import (
	"bytes"
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
	_, err := pool.Exec(t.Context(), `CREATE TABLE payments (id bigserial PRIMARY KEY, amount_cents bigint NOT NULL)`)
	require.NoError(t, err)
	return pool
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n))
	return n
}

// post sends one keyed POST with the scope's headers and no retries.
func post(t *testing.T, url, key, tenant, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/v1/payments", bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Tenant", tenant)
	req.Header.Set("X-User", "alice")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The README's server: a lost response's retry replays the payment, the
// same key in another scope is another payment, and a rejected request
// leaves its key free for the corrected one.
func TestRoutes(t *testing.T) {
	pool := paymentsDB(t)
	h, err := Routes(t.Context(), pool)
	require.NoError(t, err)
	srv := testserver.New(h, dropFirst)
	defer srv.Close()

	key := idem.NewKey()
	status, body, err := Pay(idem.WithKey(t.Context(), key), srv.URL, []byte(`{"amount_cents":1250}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, status)
	assert.Equal(t, 1, count(t, pool), "payments after one payment whose first response was lost")
	_, again, err := Pay(idem.WithKey(t.Context(), key), srv.URL, []byte(`{"amount_cents":1250}`))
	require.NoError(t, err)
	assert.Equal(t, string(body), string(again), "a resend with the key replays the payment")
	assert.Equal(t, 1, count(t, pool))

	direct := testserver.New(h, testserver.Config{})
	defer direct.Close()
	other := idem.NewKey()
	s1, b1 := post(t, direct.URL, other, "acme", `{"amount_cents":1}`)
	s2, b2 := post(t, direct.URL, other, "globex", `{"amount_cents":1}`)
	assert.Equal(t, []int{201, 201}, []int{s1, s2})
	assert.NotEqual(t, b1, b2, "one key in two tenants: two payments")

	fixed := idem.NewKey()
	s3, _ := post(t, direct.URL, fixed, "acme", `{"amount_cents":`)
	s4, _ := post(t, direct.URL, fixed, "acme", `{"amount_cents":5}`)
	assert.Equal(t, []int{400, 201}, []int{s3, s4}, "a rejection stores nothing: the corrected request runs")
	assert.Equal(t, 4, count(t, pool))
}

// The README's outbox: a payment whose first response was lost is made
// once, and its message delivered to the ledger under the key derived
// from the payment's operation.
func TestOutbox(t *testing.T) {
	pool := paymentsDB(t)
	got := make(chan string, 8)
	ledger := testserver.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Idempotency-Key")
		w.WriteHeader(http.StatusCreated)
	}), testserver.Config{})
	defer ledger.Close()
	require.NoError(t, server.Migrate(t.Context(), pool))
	ob, err := StartOutbox(t.Context(), pool)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mw := server.Middleware(server.NewPostgresStore(pool), server.Config{})
	mux.Handle("POST /v1/payments", mw(payAndNotify(ob, ledger.URL+"/v1/ledger")))
	srv := testserver.New(mux, dropFirst)
	defer srv.Close()

	key := idem.NewKey()
	status, _, err := Pay(idem.WithKey(t.Context(), key), srv.URL, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, status)
	assert.Equal(t, 1, count(t, pool))
	want := outbox.DeriveKey(server.Operation{Route: "POST /v1/payments", Key: key}, "payment.created")
	select {
	case k := <-got:
		assert.Equal(t, want, k)
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not delivered within 30 s")
	}
	st, err := ob.LookupKey(t.Context(), want)
	require.NoError(t, err)
	assert.Equal(t, outbox.StateDelivered, st.State)
	assert.Empty(t, got, "a second delivery")
}
