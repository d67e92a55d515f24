package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/gobuild"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// The acceptance of issue 30: idemctl and the admin page work against the
// payments example's database after a demo run. The demo leaves done
// payments and delivered notifications; a charge whose gateway is down
// leaves a stuck lease beside them.
func TestOperatorToolsOnTheDemosDatabase(t *testing.T) {
	o := shortRun(t)
	o.n = 100
	o.db = pgtest.SchemaURL(t)
	runDemo(t, o)
	pool := pgtest.NewPool(t, o.db)
	ctx := context.Background()

	var tenant, principal, route, key string
	require.NoError(t, pool.QueryRow(ctx, `SELECT tenant, principal, route, idem_key FROM idem_records
		WHERE state = 'done' AND status = 201 ORDER BY created_at LIMIT 1`).Scan(&tenant, &principal, &route, &key))
	stuckKey := stuckCharge(t, pool)

	bin := filepath.Join(t.TempDir(), "idemctl")
	require.NoError(t, gobuild.BuildIn(filepath.Join("..", "..", "cmd", "idemctl"), ".", bin))
	ctl := func(stdin string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"-db", o.db}, args...)...)
		var out bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &out
		err := cmd.Run()
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode(), out.String()
		}
		require.NoError(t, err)
		return 0, out.String()
	}

	code, out := ctl("", "key", "-tenant", tenant, "-principal", principal, "-route", route, "-payload", key)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "done")
	assert.Contains(t, out, "payment_id", "the stored response")
	code, out = ctl("", "inflight", "-stuck")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, stuckKey)
	assert.Contains(t, out, "gateway-called")
	code, out = ctl("", "stats")
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `stuck\s+1 `, out)
	code, out = ctl("", "parked")
	require.Equal(t, 0, code, out)
	code, out = ctl("", "key", "-tenant", tenant, "-principal", principal, "-route", route, "no-such-key")
	assert.Equal(t, 3, code, out)

	page := admin.Handler(admin.Config{Records: server.NewOperator(server.NewPostgresStore(pool), server.OperatorConfig{}),
		Outbox: demoOutbox(t, pool), Prefix: "/admin", Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(page)
	t.Cleanup(srv.Close)
	body := fetch(t, srv.URL+"/admin/inflight?stuck=1")
	assert.Contains(t, body, `data-key="`+stuckKey+`" class="stuck"`)
	scope := url.Values{"tenant": {tenant}, "principal": {principal}, "route": {route}, "key": {key}}
	assert.Contains(t, fetch(t, srv.URL+"/admin/key?"+scope.Encode()), "the stored 201, replayed")
	assert.Contains(t, fetch(t, srv.URL+"/admin/"), "Parked")
	fetch(t, srv.URL+"/admin/parked")

	code, out = ctl("yes\n", "evict", "-tenant", "acme", "-principal", "ops", "-route", "POST /v1/charges", stuckKey)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "evicted")
	assert.NotContains(t, fetch(t, srv.URL+"/admin/inflight?stuck=1"), stuckKey)
}

// stuckCharge makes a charge whose gateway is unreachable: the handler
// records its recovery point, answers 502, and its lease ends. It
// returns the charge's key.
func stuckCharge(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // connections refused
	h := api.New(api.Config{Backend: api.NewPostgresBackend(pool), Store: server.NewPostgresStore(pool),
		GatewayURL: dead.URL, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	auth := "Bearer acme:ops"
	do := func(method, path, key, body string) int {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, do(http.MethodPut, "/v1/accounts/ops-1", "", `{"balance_cents":1000}`))
	const key = "stuck-charge-1"
	require.Equal(t, http.StatusBadGateway, do(http.MethodPost, "/v1/charges", key, `{"account_id":"ops-1","amount_cents":100,"currency":"EUR"}`))
	return key
}

// demoOutbox is an outbox over the demo's River tables, for the page.
func demoOutbox(t *testing.T, pool *pgxpool.Pool) admin.Outbox {
	t.Helper()
	ob, err := outbox.New(pool, outbox.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return ob
}

// fetch GETs u and returns its body, requiring a 200.
func fetch(t *testing.T, u string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", u, b)
	return string(b)
}
