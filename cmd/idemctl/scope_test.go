package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// storeScoped makes a charge through the middleware on db under tenant
// and route (Config.Scope and Config.Route return them), with key.
func storeScoped(t *testing.T, db, tenant, route, key string) {
	t.Helper()
	pool := pgtest.NewPool(t, db)
	cfg := server.Config{Scope: func(*http.Request) (string, string) { return tenant, "alice" },
		Route: func(*http.Request) string { return route }, Logger: slog.New(slog.DiscardHandler)}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	srv := httptest.NewServer(server.Middleware(server.NewPostgresStore(pool), cfg)(h))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "the middleware stored the record")
}

// Every record the middleware stores can be looked up and evicted: a
// tenant with a tab, a route over 1 KiB (issue 41, item 10).
func TestKeyAndEvictTakeEveryStoredScope(t *testing.T) {
	db := pgtest.SchemaURL(t)
	require.NoError(t, server.Migrate(context.Background(), pgtest.NewPool(t, db)))
	long := "POST /v1/" + strings.Repeat("x", 2<<10)
	for _, sc := range []struct{ name, tenant, route string }{
		{"tenant with a tab", "acme\tcorp", "POST /v1/charges"},
		{"route over 1 KiB", "acme", long},
	} {
		t.Run(sc.name, func(t *testing.T) {
			storeScoped(t, db, sc.tenant, sc.route, "k-"+strings.ReplaceAll(sc.name, " ", "-"))
			args := []string{"-tenant", sc.tenant, "-principal", "alice", "-route", sc.route, "k-" + strings.ReplaceAll(sc.name, " ", "-")}
			code, out, errOut := ctl(t, db, "", append([]string{"key"}, args...)...)
			require.Equal(t, exitOK, code, errOut)
			assert.Contains(t, out, "done")
			code, out, errOut = ctl(t, db, "", append([]string{"evict", "-yes"}, args...)...)
			require.Equal(t, exitOK, code, errOut)
			assert.Contains(t, out, "evicted")
			code, _, _ = ctl(t, db, "", append([]string{"key"}, args...)...)
			assert.Equal(t, exitNotFound, code, "evicted")
		})
	}

	// A scope no record can have is refused, saying exactly why.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"key", "-route", "", "k"}, "the route is empty"},
		{[]string{"key", "-route", "POST /v1/charges", "has space"}, "key has byte 0x20 at offset 3"},
		{[]string{"key", "-route", "POST /v1/charges", strings.Repeat("k", 256)}, "key is 256 bytes long, the maximum is 255"},
	} {
		code, _, errOut := ctl(t, db, "", tc.args...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, errOut, tc.want)
		assert.NotContains(t, errOut, "control characters")
	}
}

// A -limit outside 1 to 1000 is a usage error, not the default page
// (issue 41, item 10).
func TestLimitOutOfRangeIsAUsageError(t *testing.T) {
	db := pgtest.SchemaURL(t)
	require.NoError(t, server.Migrate(context.Background(), pgtest.NewPool(t, db)))
	for _, args := range [][]string{
		{"inflight", "-limit", "-1"}, {"inflight", "-limit", "0"}, {"inflight", "-limit", "1001"},
		{"parked", "-limit", "-5"}, {"parked", "-limit", "0"},
	} {
		code, out, errOut := ctl(t, db, "", args...)
		assert.Equal(t, exitUsage, code, "%v: %s%s", args, out, errOut)
		assert.Contains(t, errOut, "it must be 1 to 1000", "%v", args)
		assert.NotContains(t, errOut, "idemctl: usage", "%v: said once, not twice", args)
		assert.Empty(t, out, "%v: nothing printed", args)
	}
	code, _, errOut := ctl(t, db, "", "inflight", "-limit", "1000")
	assert.Equal(t, exitOK, code, errOut)
}
