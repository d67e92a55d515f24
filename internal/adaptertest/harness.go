package adaptertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// Build builds the sample API (see [App]) on a framework, with the
// framework's idem middleware over store, configured by cfg (mode, hooks,
// logger) and with a Scope that reads the caller that the API's
// authentication put in the framework's context.
type Build func(app *App, store server.Store, cfg server.Config) http.Handler

// api is one sample API under test: its server, app and database.
type api struct {
	url string
	app *App
}

// start serves the API built on a fresh schema, with a PostgresStore, until
// the test ends.
func start(t *testing.T, build Build, cfg server.Config) *api {
	t.Helper()
	pool := pgtest.Pool(t)
	require.NoError(t, Setup(t.Context(), pool))
	a := &api{app: &App{pool: pool}}
	srv := httptest.NewServer(build(a.app, server.NewPostgresStore(pool), cfg))
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

// count is the number of payments from account.
func (a *api) count(t *testing.T, account string) int {
	t.Helper()
	n, err := a.app.Count(context.Background(), account)
	require.NoError(t, err)
	return n
}

// modes are the modes every check runs in.
var modes = []struct {
	name string
	mode server.Mode
}{{"transactional", server.Transactional}, {"leased", server.Leased}}
