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
