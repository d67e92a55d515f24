package admin

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// makeUncertain runs a reconciler that never knows over store, with a
// MaxAge that every abandoned operation has reached, until n operations
// were left uncertain.
func makeUncertain(t *testing.T, store server.Store, n int) {
	t.Helper()
	parked := make(chan struct{}, n)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.RunReconciler(ctx, store, server.ReconcileConfig{MaxAge: time.Nanosecond, Interval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
			Routes: map[string]server.ReconcileFunc{route: func(context.Context, *server.Abandoned) (server.Settlement, error) {
				return server.Settlement{Answer: server.NotKnown}, nil
			}},
			Hooks: server.ReconcileHooks{Parked: func(context.Context, server.ReconcileEvent) { parked <- struct{}{} }}})
	}()
	for range n {
		select {
		case <-parked:
		case <-time.After(30 * time.Second):
			t.Fatal("the reconciler left nothing uncertain")
		}
	}
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled, "the reconciler stops with its context")
}

func resolveForm(key string, fields ...string) url.Values {
	form := url.Values{"scope": {scopeForm(key).Encode()}}
	for i := 0; i+1 < len(fields); i += 2 {
		form.Set(fields[i], fields[i+1])
	}
	return form
}

func TestResolveAnUncertainOperation(t *testing.T) {
	f := newFixture(t)
	f.call(t, "stuck-applied")
	f.call(t, "stuck-not")
	f.call(t, "stuck-running")
	makeUncertain(t, f.store, 3)
	srv := f.page(t, Config{AllowWrites: true})

	status, body := get(t, srv, "/admin/inflight")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `<tr data-key="stuck-applied" class="uncertain">`)
	status, body = get(t, srv, "/admin/key?"+scopeForm("stuck-applied").Encode())
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "409 outcome-uncertain")
	assert.Contains(t, body, `id="resolve-link"`)

	applied := resolveForm("stuck-applied", "outcome", "applied", "status", "201", "content_type", "application/json",
		"body", `{"charge_id":"ch_1"}`, "by", "ops@acme", "reason", "T-1: the gateway shows ch_1")
	status, _ = postForm(t, srv, "/admin/resolve", applied)
	assert.Equal(t, http.StatusForbidden, status, "no token")
	status, form := get(t, srv, "/admin/resolve?"+scopeForm("stuck-applied").Encode())
	require.Equal(t, http.StatusOK, status, form)
	applied.Set("csrf", csrfField.FindStringSubmatch(form)[1])
	status, _ = postForm(t, srv, "/admin/resolve", applied, "Sec-Fetch-Site", "cross-site")
	assert.Equal(t, http.StatusForbidden, status, "a cross-site POST")
	rec, err := f.lookup("stuck-applied")
	require.NoError(t, err)
	require.Equal(t, "uncertain", rec.State, "nothing resolved yet")

	status, body = postForm(t, srv, "/admin/resolve", applied)
	require.Equal(t, http.StatusSeeOther, status, body)
	rec, err = f.lookup("stuck-applied")
	require.NoError(t, err)
	assert.Equal(t, "done", rec.State)
	require.NotNil(t, rec.Resolved)
	assert.Equal(t, "ops@acme", rec.Resolved.By)
	_, body = get(t, srv, "/admin/key?"+scopeForm("stuck-applied").Encode())
	assert.Contains(t, body, "applied by ops@acme")

	status, body = postForm(t, srv, "/admin/resolve", applied)
	assert.Equal(t, http.StatusConflict, status, "a resolved operation is refused: %s", body)
	assert.Contains(t, body, "not uncertain")

	notApplied := resolveForm("stuck-not", "outcome", "not-applied", "by", "ops@acme", "reason", "T-2: no charge",
		"csrf", applied.Get("csrf"))
	status, body = postForm(t, srv, "/admin/resolve", notApplied)
	require.Equal(t, http.StatusSeeOther, status, body)
	rec, err = f.lookup("stuck-not")
	require.NoError(t, err)
	assert.Equal(t, "not-applied", rec.State)

	incomplete := resolveForm("stuck-running", "outcome", "not-applied", "csrf", applied.Get("csrf"))
	status, body = postForm(t, srv, "/admin/resolve", incomplete)
	assert.Equal(t, http.StatusBadRequest, status, body)
	assert.True(t, strings.Contains(body, "who resolved it and why"), body)
}
