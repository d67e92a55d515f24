package frameworks

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(pgtest.Main(m))
}

// examples are the guide's APIs, with the route pattern each records.
var examples = []struct {
	name  string
	build func(server.Store) http.Handler
	route string
}{
	{"gin", newGinAPI, "POST /v1/accounts/:id/payments"},
	{"echo", newEchoAPI, "POST /v1/accounts/:id/payments"},
	{"echo5", newEcho5API, "POST /v1/accounts/:id/payments"},
	{"chi", newChiAPI, "POST /v1/accounts/{id}/payments"},
	{"gorillamux", newGorillaAPI, "POST /v1/accounts/{id}/payments"},
}

// exchange is one response.
type exchange struct {
	status   int
	body     string
	replayed bool
}

func post(t *testing.T, url, account, user, key string) exchange {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/accounts/"+account+"/payments", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("X-Tenant", "acme")
	req.Header.Set("X-User", user)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return exchange{resp.StatusCode, strings.TrimSpace(string(b)), resp.Header.Get("Idempotent-Replayed") == "true"}
}

// TestExamples runs each example of docs/frameworks.md on Postgres: the
// first request pays, its retry is a replay, another user's key is
// another record, the same key on another account is refused, and each
// record names the route's pattern.
func TestExamples(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			pool := pgtest.Pool(t)
			require.NoError(t, server.Migrate(t.Context(), pool))
			_, err := pool.Exec(t.Context(), `CREATE TABLE payments (id bigserial PRIMARY KEY, account text NOT NULL)`)
			require.NoError(t, err)
			srv := httptest.NewServer(ex.build(server.NewPostgresStore(pool)))
			t.Cleanup(srv.Close)

			first := post(t, srv.URL, "1", "alice", "k1")
			assert.Equal(t, exchange{http.StatusCreated, `{"payment_id":1}`, false}, first)
			assert.Equal(t, exchange{http.StatusCreated, `{"payment_id":1}`, true}, post(t, srv.URL, "1", "alice", "k1"))
			assert.Equal(t, exchange{http.StatusCreated, `{"payment_id":2}`, false}, post(t, srv.URL, "1", "bob", "k1"),
				"another principal's key is another record")
			other := post(t, srv.URL, "2", "alice", "k1")
			assert.Equal(t, http.StatusUnprocessableEntity, other.status, "the key on another account: %s", other.body)
			assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM payments`))
			assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM idem_records WHERE route = $1`, ex.route), "records of the route %q", ex.route)
		})
	}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}
