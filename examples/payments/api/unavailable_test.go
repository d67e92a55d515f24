package api

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// unreachableURL is a database URL on a loopback port where nothing
// listens: every connection attempt is refused at once.
func unreachableURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "postgres://payments@" + addr + "/payments?sslmode=disable&connect_timeout=5"
}

// requireStoreUnavailable requires the answer of a store that cannot be
// reached: 503, Retry-After, a problem document named store-unavailable
// (the API's or the idempotency middleware's), never 500 internal.
func requireStoreUnavailable(t *testing.T, rec *httptest.ResponseRecorder, what string) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "%s: %s", what, rec.Body)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"), what)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), what)
	assert.Equal(t, "store-unavailable", problemName(rec), "%s: %s", what, rec.Body)
	assert.NotContains(t, rec.Body.String(), "payments@", "%s: the body names the connection string", what)
}

// Every route that needs the database answers 503 with Retry-After while
// the database cannot be reached: the handlers' own reads and writes (an
// unkeyed PUT, a GET) get the API's problem, keyed requests the
// middleware's, whose claim fails first.
func TestEveryRouteAnswers503WhileTheStoreIsUnreachable(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), unreachableURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, gatewayURL := newGatewayServer(t)
	var log bytes.Buffer
	h := New(Config{Backend: NewPostgresBackend(pool), Store: server.NewPostgresStore(pool), GatewayURL: gatewayURL,
		GatewayClient: fastGatewayClient(), Logger: slog.New(slog.NewTextHandler(&log, nil))})

	const pay = `{"account_id":"acc-1","amount_cents":100,"currency":"EUR"}`
	for _, c := range []call{
		{method: "PUT", path: "/v1/accounts/acc-1", body: `{"balance_cents":100}`},
		{method: "PUT", path: "/v1/accounts/acc-1", key: "put-1", body: `{"balance_cents":100}`},
		{method: "GET", path: "/v1/accounts/acc-1"},
		{method: "POST", path: "/v1/payments", key: "pay-1", body: pay},
		{method: "POST", path: "/v1/charges", key: "charge-1", body: pay},
	} {
		requireStoreUnavailable(t, do(t, h, c), fmt.Sprintf("%s %s key %q", c.method, c.path, c.key))
	}
	assert.NotContains(t, log.String(), "internal error", "the log")
	assert.Equal(t, http.StatusOK, do(t, h, call{method: "GET", path: "/healthz"}).Code,
		"GET /healthz: the process is alive; a restart would not bring the database back")
}

// The Receiver's routes too: GET lists from the database, a keyed POST
// claims first.
func TestReceiverAnswers503WhileTheStoreIsUnreachable(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), unreachableURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	rc := NewReceiver(ReceiverConfig{DB: pool, Logger: quietLogger()})
	requireStoreUnavailable(t, do(t, rc, call{method: "GET", path: "/v1/notifications"}), "GET /v1/notifications")
	requireStoreUnavailable(t, do(t, rc, call{method: "POST", path: "/v1/notifications", key: "n-1",
		body: `{"event":"payment.created","payment_id":"pay_1"}`}), "POST /v1/notifications")
}

// A connection lost in the middle of a payment (its backend terminated
// after the claim, inside the middleware's transaction) answers 503, not
// 500 internal, and the payment did not happen: a retry with the key makes
// it once.
func TestConnectionLostInAPaymentAnswers503(t *testing.T) {
	pool := pgtest.Pool(t)
	require.NoError(t, Migrate(context.Background(), pool))
	admin := pgtest.NewPool(t, pgtest.DatabaseURL(t))
	terminate := true
	cfg := Config{Backend: NewPostgresBackend(pool), Store: server.NewPostgresStore(pool), Logger: quietLogger(),
		Hooks: server.Hooks{Claimed: func(ctx context.Context, _ server.Event) {
			tx, _ := server.Tx(ctx)
			if terminate {
				terminate = false
				_, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, tx.Conn().PgConn().PID())
				require.NoError(t, err)
			}
		}}}
	h := New(cfg)
	putAccount(t, h, "acc-1", 1000)

	body := `{"account_id":"acc-1","amount_cents":100,"currency":"EUR"}`
	requireStoreUnavailable(t, do(t, h, call{method: "POST", path: "/v1/payments", key: "pay-1", body: body}), "the payment whose connection was lost")
	assert.Equal(t, int64(1000), getAccount(t, h, "acc-1").BalanceCents, "the balance after the lost payment")
	rec := do(t, h, call{method: "POST", path: "/v1/payments", key: "pay-1", body: body})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	assert.Equal(t, int64(900), getAccount(t, h, "acc-1").BalanceCents, "the balance after the retry")
}

// A connection lost at the commit of a payment (its backend terminated
// after the handler answered 201, before the middleware committed) answers
// 503 with Retry-After too, as the middleware's commit-failed: the outcome
// is unknown to the server, never the uncommitted 201 and never 500
// internal. Here it had not committed, and the retry with the key makes
// the payment once.
func TestConnectionLostAtCommitAnswers503(t *testing.T) {
	pool := pgtest.Pool(t)
	require.NoError(t, Migrate(context.Background(), pool))
	admin := pgtest.NewPool(t, pgtest.DatabaseURL(t))
	terminate := false
	cfg := Config{Backend: NewPostgresBackend(pool), Store: server.NewPostgresStore(pool), Logger: quietLogger(),
		Hooks: server.Hooks{Handled: func(ctx context.Context, e server.Event) {
			tx, _ := server.Tx(ctx)
			if terminate && e.Status == http.StatusCreated {
				terminate = false
				_, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, tx.Conn().PgConn().PID())
				require.NoError(t, err)
			}
		}}}
	h := New(cfg)
	putAccount(t, h, "acc-1", 1000)

	terminate = true
	body := `{"account_id":"acc-1","amount_cents":100,"currency":"EUR"}`
	rec := do(t, h, call{method: "POST", path: "/v1/payments", key: "pay-1", body: body})
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "the payment whose commit lost its connection: %s", rec.Body)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	assert.Equal(t, "commit-failed", problemName(rec), rec.Body.String())
	assert.Equal(t, int64(1000), getAccount(t, h, "acc-1").BalanceCents, "the balance after the lost commit")
	rec = do(t, h, call{method: "POST", path: "/v1/payments", key: "pay-1", body: body})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	assert.Equal(t, int64(900), getAccount(t, h, "acc-1").BalanceCents, "the balance after the retry")
}
