package browser

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// chromium returns the path of the Chromium binary; the test skips
// without one, and fails under CI=true (.ci/run installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH; under CI=true the browser test must run (bash .ci/run installs the Debian package chromium)")
	}
	t.Skip("no chromium on PATH: apt-get install chromium to run the browser test")
	return ""
}

// browser starts a headless Chromium with a fresh profile, closed when the
// test ends, and returns a context that drives it. The flags keep it from
// reaching anything but the test's server (the machine has no network).
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAlloc() })
	return ctx
}

// stuckLease leaves a stuck lease on key in pool's records: a Leased
// attempt that recorded its recovery point and answered 502.
func stuckLease(t *testing.T, pool *pgxpool.Pool, key string) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls, _ := server.LeaseFrom(r.Context())
		_ = ls.Checkpoint(r.Context(), "gateway-called", json.RawMessage(`{"charge":"ch_1"}`))
		w.WriteHeader(http.StatusBadGateway)
	})
	mux := http.NewServeMux()
	cfg := server.Config{Mode: server.Leased, Scope: func(*http.Request) (string, string) { return "acme", "alice" },
		Logger: slog.New(slog.DiscardHandler)}
	mux.Handle("POST /v1/charges", server.Middleware(server.NewPostgresStore(pool), cfg)(h))
	api := httptest.NewServer(mux)
	defer api.Close()
	req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/charges", nil)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
}

// screenshot saves a PNG of the page in $IDEM_SCREENSHOTS (a temporary
// directory when unset) and logs where.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := os.Getenv("IDEM_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// The acceptance of issue 30: in a real browser, an operator finds the
// stuck lease the test created on the admin page, evicts it with the
// button, and the record is gone from the database.
func TestEvictAStuckLeaseInTheBrowser(t *testing.T) {
	ctx := browser(t)
	pool := pgtest.Pool(t)
	require.NoError(t, server.Migrate(context.Background(), pool))
	const key = "order-1001"
	stuckLease(t, pool, key)
	page := admin.Handler(admin.Config{
		Records:     server.NewOperator(server.NewPostgresStore(pool), server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)}),
		AllowWrites: true, Prefix: "/admin", Logger: slog.New(slog.DiscardHandler),
	})
	mux := http.NewServeMux()
	mux.Handle("/admin/", page)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	row := `tr[data-key="` + key + `"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/admin/"),
		chromedp.Click(`a[href="/admin/inflight?stuck=1"]`, chromedp.NodeVisible),
		chromedp.WaitVisible(row),
	))
	class, err := chromedp.Run(ctx, chromedp.AttributeValue(row, "class"))
	require.NoError(t, err)
	assert.Equal(t, "stuck", class.Value, "the row is marked stuck")
	lease, err := chromedp.Run(ctx, chromedp.Text(row+` td:nth-child(8)`))
	require.NoError(t, err)
	assert.Contains(t, lease, "stuck")
	screenshot(t, ctx, "admin-stuck.png")

	require.NoError(t, chromedp.Do(ctx, chromedp.Click(row+` a`, chromedp.NodeVisible)))
	step, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = chromedp.Do(step, chromedp.WaitVisible(`#record`))
	cancel()
	if err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		html, _ := chromedp.Run(ctx, chromedp.OuterHTML("html"))
		t.Fatalf("no record at %s: %v\n%s", loc, err, html)
	}
	state, err := chromedp.Run(ctx, chromedp.Text(`#record tr:first-child td`))
	require.NoError(t, err)
	assert.Contains(t, state, "stuck")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#evict-link`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#evict`),
	))
	screenshot(t, ctx, "admin-evict-confirm.png")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#evict`, chromedp.NodeVisible),
		chromedp.WaitVisible(`#no-record`),
	))
	notice, err := chromedp.Run(ctx, chromedp.Text(`.notice`))
	require.NoError(t, err)
	assert.Contains(t, notice, "The record was evicted")
	screenshot(t, ctx, "admin-evicted.png")

	var rows int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM idem_records WHERE idem_key = $1`, key).Scan(&rows))
	assert.Zero(t, rows, "the button evicted the record from the database")
}
