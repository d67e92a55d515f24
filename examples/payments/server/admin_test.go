//go:build unix

package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
)

// The server program with -admin-token mounts idem's admin page and River
// UI behind the operators' authentication; the admin page shows a charge
// whose gateway is down as stuck.
func TestAdminPagesBehindTheOperatorsAuth(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // the gateway refuses connections
	p := startServer(t, buildServer(t), nil, "-addr", "127.0.0.1:0", "-db", pgtest.SchemaURL(t),
		"-gateway", dead.URL, "-admin-token", "op-secret")
	mustSend(t, http.StatusOK, http.MethodPut, p.url+"/v1/accounts/acc-1", "", `{"balance_cents":1000}`)
	mustSend(t, http.StatusBadGateway, http.MethodPost, p.url+"/v1/charges", "order-7", `{"account_id":"acc-1","amount_cents":100,"currency":"EUR"}`)

	get := func(path, password string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, p.url+path, nil)
		if password != "" {
			req.SetBasicAuth("operator", password)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/admin/", "/admin/inflight?stuck=1", "/riverui/"} {
		code, _ := get(path, "")
		assert.Equal(t, http.StatusUnauthorized, code, "%s without the operators' password", path)
		code, _ = get(path, "wrong")
		assert.Equal(t, http.StatusUnauthorized, code, "%s with a wrong password", path)
	}
	code, body := get("/admin/inflight?stuck=1", "op-secret")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `data-key="order-7" class="stuck"`)
	assert.Contains(t, body, "read-only", "no -admin-write")
	code, body = get("/riverui/", "op-secret")
	require.Equal(t, http.StatusOK, code, body)
	assert.True(t, strings.Contains(body, "<html") || strings.Contains(body, "<!doctype"), "River UI's page: %.200s", body)
	code, _ = get("/riverui/api/jobs?state=cancelled", "op-secret")
	assert.Equal(t, http.StatusOK, code, "River UI's API")
	code, _ = get("/v1/accounts/acc-1", "")
	assert.Equal(t, http.StatusUnauthorized, code, "the API keeps its own authentication")
}
