package browser

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// leaveUncertain runs a reconciler that never knows, with a MaxAge that
// the stuck operation has reached, until it was left uncertain.
func leaveUncertain(t *testing.T, store server.Store) {
	t.Helper()
	parked := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.RunReconciler(ctx, store, server.ReconcileConfig{MaxAge: time.Nanosecond, Interval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
			Routes: map[string]server.ReconcileFunc{"POST /v1/charges": func(context.Context, *server.Abandoned) (server.Settlement, error) {
				return server.Settlement{Answer: server.NotKnown}, nil
			}},
			Hooks: server.ReconcileHooks{Parked: func(context.Context, server.ReconcileEvent) { parked <- struct{}{} }}})
	}()
	select {
	case <-parked:
	case <-time.After(30 * time.Second):
		t.Fatal("the reconciler left nothing uncertain")
	}
	cancel()
	<-done
}

// The acceptance of issue 46 item 2 on the page: an operator finds the
// uncertain operation in the list, resolves it as applied with the form,
// and the database holds the response and who resolved it.
func TestResolveAnUncertainOperationInTheBrowser(t *testing.T) {
	ctx := browser(t)
	pool := pgtest.Pool(t)
	require.NoError(t, server.Migrate(context.Background(), pool))
	const key = "order-2002"
	stuckLease(t, pool, key)
	store := server.NewPostgresStore(pool)
	leaveUncertain(t, store)
	page := admin.Handler(admin.Config{
		Records:     server.NewOperator(store, server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)}),
		AllowWrites: true, Prefix: "/admin", Logger: slog.New(slog.DiscardHandler),
	})
	mux := http.NewServeMux()
	mux.Handle("/admin/", page)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	row := `tr[data-key="` + key + `"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/admin/inflight"),
		chromedp.WaitVisible(row),
	))
	class, err := chromedp.Run(ctx, chromedp.AttributeValue(row, "class"))
	require.NoError(t, err)
	assert.Equal(t, "uncertain", class.Value, "the row is marked uncertain")
	screenshot(t, ctx, "admin-uncertain.png")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(row+` a`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#record`),
		chromedp.Click(`#resolve-link`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#resolve`),
		chromedp.Click(`#applied`, chromedp.NodeVisible),
		chromedp.SendKeys(`#status`, "201"),
		chromedp.SendKeys(`#body`, `{"charge":"ch_1"}`),
		chromedp.SendKeys(`#by`, "ops@acme"),
		chromedp.SendKeys(`#reason`, "T-7: the gateway shows ch_1"),
	))
	screenshot(t, ctx, "admin-resolve-form.png")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#resolve`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#resolved`),
	))
	notice, err := chromedp.Run(ctx, chromedp.Text(`.notice`))
	require.NoError(t, err)
	assert.Contains(t, notice, "was resolved")
	resolved, err := chromedp.Run(ctx, chromedp.Text(`#resolved`))
	require.NoError(t, err)
	assert.Contains(t, resolved, "applied by ops@acme")
	screenshot(t, ctx, "admin-resolved.png")

	var state, by string
	var status int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT state, status, resolved_by FROM idem_records WHERE idem_key = $1`, key).Scan(&state, &status, &by))
	assert.Equal(t, []any{"done", 201, "ops@acme"}, []any{state, status, by})
}
