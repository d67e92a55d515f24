package browser

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// In a real browser, an operator who holds only the operation reference a
// client showed types it into the overview's field and gets the record.
func TestLookUpAReferenceInTheBrowser(t *testing.T) {
	ctx := browser(t)
	pool := pgtest.Pool(t)
	require.NoError(t, server.Migrate(context.Background(), pool))
	const key = "order-2002"
	stuckLease(t, pool, key)
	page := admin.Handler(admin.Config{
		Records: server.NewOperator(server.NewPostgresStore(pool), server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)}),
		Prefix:  "/admin", Logger: slog.New(slog.DiscardHandler),
	})
	mux := http.NewServeMux()
	mux.Handle("/admin/", page)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ref := server.OperationRef("acme", "alice", "POST /v1/charges", key)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/admin/"),
		chromedp.SendKeys(`input[name="ref"]`, ref, chromedp.NodeVisible),
		chromedp.Submit(`input[name="ref"]`),
		chromedp.WaitVisible(`#record`),
	))
	shown, err := chromedp.Run(ctx, chromedp.Text(`#ref`))
	require.NoError(t, err)
	assert.Equal(t, ref, shown)
	scope, err := chromedp.Run(ctx, chromedp.Text(`table.scope`))
	require.NoError(t, err)
	assert.Contains(t, scope, key)
}
