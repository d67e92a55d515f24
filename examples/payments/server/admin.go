package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// withAdmin mounts, when o.adminToken is set, the operators' pages in
// front of the API: idem's admin page at /admin/ (package admin: records,
// stuck leases, parked messages; evict and re-drive with -admin-write) and,
// on Postgres, River UI at /riverui/ (the outbox's jobs, arguments
// included). Both are behind the example's operator authentication
// (operatorAuth): neither has one of its own. ob is the outbox of
// -notify, or nil. stop stops River UI's background work.
func withAdmin(ctx context.Context, o options, api http.Handler, store server.Store, ob admin.Outbox, log *slog.Logger) (h http.Handler, stop func(), err error) {
	if o.adminToken == "" {
		return api, func() {}, nil
	}
	records, ok := store.(server.RecordStore)
	if !ok {
		return nil, nil, errors.New("-admin-token: the store cannot be inspected (no server.RecordStore)")
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	page := admin.Handler(admin.Config{
		Records:     server.NewOperator(records, server.OperatorConfig{Logger: log}),
		Outbox:      ob,
		AllowWrites: o.adminWrite,
		Prefix:      "/admin",
		Logger:      log,
	})
	mux.Handle("/admin/", operatorAuth(o.adminToken, page))
	stop = func() {}
	if o.db != "" {
		ui, stopUI, err := riverUI(ctx, o.db, log)
		if err != nil {
			return nil, nil, fmt.Errorf("-admin-token: River UI: %w", err)
		}
		mux.Handle("/riverui/", operatorAuth(o.adminToken, ui))
		stop = stopUI
	}
	return mux, stop, nil
}

// riverUI serves River UI over the outbox's River tables, through a pool
// and an insert-only River client of its own (they run no job).
func riverUI(ctx context.Context, db string, log *slog.Logger) (http.Handler, func(), error) {
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	if err := outbox.Migrate(ctx, pool); err != nil { // River's tables, for a server without -notify
		pool.Close()
		return nil, nil, err
	}
	client, err := river.NewClient[pgx.Tx](riverpgxv5.New(pool), &river.Config{Logger: log})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{Endpoints: riverui.NewEndpoints(client, nil), Logger: log, Prefix: "/riverui"})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	uiCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := ui.Start(uiCtx); err != nil {
		cancel()
		pool.Close()
		return nil, nil, err
	}
	return ui, func() { cancel(); pool.Close() }, nil
}

// operatorAuth admits the requests that carry the operator token as the
// password of HTTP Basic authentication (any user name), so that a
// browser asks for it, and answers 401 to the others. It is the example's
// operator authentication: a real service puts its own single sign-on
// here, for operators only, since these pages show every tenant's data.
func operatorAuth(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, password, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(password), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="payments operators", charset="UTF-8"`)
			http.Error(w, "operators only: the password is the server's -admin-token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
