package admin

import (
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// The page looks up and evicts every record the middleware stores (a
// tenant with a tab, a route over 1 KiB), and shows stored bytes escaped
// as idemctl does, so that a tab, an escape or a bidirectional override in
// them is visible (issue 41, items 9 and 10).
func TestPageTakesEveryStoredScopeAndEscapesIt(t *testing.T) {
	store := server.NewMemoryStore()
	ops := server.NewOperator(store, server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)})
	mux := http.NewServeMux()
	mux.Handle("/admin/", Handler(Config{Records: ops, Prefix: "/admin", AllowWrites: true, Logger: slog.New(slog.DiscardHandler)}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	long := "POST /v1/" + strings.Repeat("x", 2<<10)
	for _, op := range []server.Operation{
		{Tenant: "acme\tcorp", Principal: "al\u202eice", Route: route, Key: "k-tab"},
		{Tenant: "acme", Principal: "alice", Route: long, Key: "k-long"},
		{Tenant: "a\x00b", Principal: "line\r\nbreak", Route: route, Key: "k-nul"},
	} {
		charge(t, store, op, "charged\x1b]52;c;eA==\x07")
		q := url.Values{"tenant": {op.Tenant}, "principal": {op.Principal}, "route": {op.Route}, "key": {op.Key}}
		status, body := get(t, srv, "/admin/key?"+q.Encode()+"&payload=1")
		require.Equal(t, http.StatusOK, status, "%s: %s", op.Key, body)
		assert.Contains(t, body, "the stored 201, replayed", op.Key)
		assert.Contains(t, body, `charged\x1b]52;c;eA==\a`, "%s: the body, escaped", op.Key)
		assert.NotContains(t, body, "\x1b", op.Key)
		if op.Key == "k-tab" {
			assert.Contains(t, body, `<td>acme\tcorp</td>`, "the tab is visible")
			assert.Contains(t, body, `<td>al\u202eice</td>`, "the override is visible, and overrides nothing")
		}

		status, body = get(t, srv, "/admin/evict?"+q.Encode())
		require.Equal(t, http.StatusOK, status, body)
		status, body = postForm(t, srv, "/admin/evict", hiddenFields(body))
		assert.Equal(t, http.StatusSeeOther, status, "%s: %s", op.Key, body)
		_, err := ops.Lookup(context.Background(), op, false)
		assert.ErrorIs(t, err, server.ErrUnknownKey, "%s: evicted", op.Key)
	}
}

// hiddenField is a hidden field of a form, as html/template writes it.
var hiddenField = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// hiddenFields are the hidden fields of page's form, as a browser sends
// them, less its newline normalization: html/template has already changed
// a NUL.
func hiddenFields(page string) url.Values {
	form := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
		form.Add(m[1], html.UnescapeString(m[2]))
	}
	return form
}

// charge stores, through the middleware, a done record of op's scope
// whose response body is body.
func charge(t *testing.T, store *server.MemoryStore, op server.Operation, body string) {
	t.Helper()
	cfg := server.Config{Scope: func(*http.Request) (string, string) { return op.Tenant, op.Principal },
		Route: func(*http.Request) string { return op.Route }, Logger: slog.New(slog.DiscardHandler)}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	})
	api := httptest.NewServer(server.Middleware(store, cfg)(h))
	t.Cleanup(api.Close)
	req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/charges", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", op.Key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
}
