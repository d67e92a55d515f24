package api

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/internal/mysqltest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/mysqlidem"
	"github.com/idemkit/idem/server"
)

// backends are the two ways to run the API and its Receiver; every
// behaviour test runs over both.
var backends = []string{"memory", "postgres"}

// apiBackends add MySQL (MariaDB here), which the API runs on and the
// Receiver does not: the behaviour tests of the API's routes run over
// all three.
var apiBackends = []string{"memory", "postgres", "mysql"}

// newConfig returns a Config over the named backend (set in Backend), with
// a quiet logger.
// Postgres tests get a fresh schema (and skip, or fail under CI=true, when
// no database is reachable).
func newConfig(t *testing.T, backend string) Config {
	t.Helper()
	cfg := Config{Logger: quietLogger(), Backend: NewMemoryBackend()}
	if backend == "postgres" {
		pool := pgtest.Pool(t)
		require.NoError(t, Migrate(context.Background(), pool))
		cfg.Backend, cfg.Store = NewPostgresBackend(pool), server.NewPostgresStore(pool)
	}
	if backend == "mysql" {
		db, err := sql.Open("mysql", mysqltest.Database(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		require.NoError(t, mysqlidem.Migrate(context.Background(), db))
		require.NoError(t, MigrateMySQL(context.Background(), db))
		cfg.Backend, cfg.Store = NewMySQLBackend(db), mysqlidem.New(db)
	}
	return cfg
}

// newGatewayServer starts a Gateway on a loopback port.
func newGatewayServer(t *testing.T) (*Gateway, string) {
	t.Helper()
	gw := NewGateway(GatewayConfig{Logger: quietLogger()})
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return gw, srv.URL
}

// fastGatewayClient is an idem client with short waits, for tests.
func fastGatewayClient() *http.Client {
	return idem.NewClient(idem.Config{AttemptTimeout: 2 * time.Second, Backoff: idem.Backoff{Base: time.Millisecond}})
}

// call is one request to the API.
type call struct {
	method, path string
	token        string // "" means "Bearer acme:alice"; "-" means none
	key          string
	body         string
}

// do serves c on h and returns the recorded response.
func do(t *testing.T, h http.Handler, c call) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
	switch c.token {
	case "":
		req.Header.Set("Authorization", "Bearer acme:alice")
	case "-":
	default:
		req.Header.Set("Authorization", c.token)
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// putAccount creates an account of tenant acme, in EUR.
func putAccount(t *testing.T, h http.Handler, id string, balance int64) {
	t.Helper()
	rec := do(t, h, call{method: "PUT", path: "/v1/accounts/" + id, body: `{"balance_cents":` + itoa(balance) + `}`})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

// getAccount reads an account of tenant acme.
func getAccount(t *testing.T, h http.Handler, id string) Account {
	t.Helper()
	rec := do(t, h, call{method: "GET", path: "/v1/accounts/" + id})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var a Account
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a))
	return a
}

// problemName returns the problem name of a problem+json response, "" for
// another body.
func problemName(rec *httptest.ResponseRecorder) string {
	p, _ := wire.ReadProblem(rec.Header().Get("Content-Type"), bytes.NewReader(rec.Body.Bytes()), 1<<16)
	return p.Name()
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
