package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/server"
)

// defaultLease is Config.Lease's default. The API resolves it and gives
// the middleware the resolved lease, because the gateway call must fit in
// the lease (createCharge).
const defaultLease = 30 * time.Second

// Config configures the API. Its zero value serves accounts and payments
// from memory, requires an Idempotency-Key on POST /v1/payments, and does
// not mount POST /v1/charges (no gateway).
type Config struct {
	// Backend keeps accounts, payments and charges. Nil: a new
	// MemoryBackend.
	Backend Backend

	// Store keeps the idempotency records: a server.PostgresStore on the
	// Backend's database (so that a payment and its stored response commit
	// together), or a server.MemoryStore with a MemoryBackend. Nil: a
	// server.PostgresStore on the database of a PostgresBackend (whose DB
	// must then be a server.DB too, as *pgxpool.Pool is: New panics
	// otherwise), and a new server.MemoryStore with a MemoryBackend. With
	// a MySQLBackend it must be a mysqlidem.Store on the same *sql.DB: New
	// panics when it is nil (the API imports no MySQL driver). Never
	// pair a durable Backend with a MemoryStore: after a restart the
	// payments remain but their stored responses are gone, and a retry pays
	// again.
	Store server.Store

	// ChargesStore keeps the idempotency records of POST /v1/charges, a
	// Leased route, whose effect leaves the database: any store that
	// serves Leased mode, such as idemredis.Store on Redis (the charge
	// and its credit still commit in the Backend). Nil: Store. Run the
	// reconciler (ReconcileRoutes) on this store.
	ChargesStore server.Store

	// Keys says what POST /v1/payments does without an Idempotency-Key.
	// Zero: server.KeyRequired, a 400 key-missing. server.KeyOptional runs
	// such a request unprotected (the demo's naive client needs it); keyed
	// requests are protected either way. POST /v1/charges always requires
	// a key: its downstream key derives from it.
	Keys server.KeyPolicy

	// Retention is how long a stored response answers retries. Zero: the
	// server's default (server.Config.Retention), 24 h.
	Retention time.Duration

	// Lease is the lease of a POST /v1/charges attempt, which the handler
	// renews before it calls the gateway. Zero: 30 s, as the server's
	// default (server.Config.Lease).
	Lease time.Duration

	// GatewayURL is the base URL of the card gateway (see Gateway) that
	// POST /v1/charges calls. Empty: the route is not mounted.
	GatewayURL string

	// GatewayClient calls the gateway. Nil: an idem client (retries with
	// the downstream key, a 2 s bound per attempt). A client of another
	// kind works too: the handler sets the Idempotency-Key header itself.
	GatewayClient *http.Client

	// Hooks observe the idempotency middleware's steps (see server.Hooks);
	// the crash tests kill a server process from them.
	Hooks server.Hooks

	// OnStep, when set, is called as POST /v1/charges reaches each of its
	// steps: StepGatewayCalled, StepGatewayAnswered, StepRecorded. Like
	// Hooks, it is for tests that crash the process at an exact point.
	OnStep func(ctx context.Context, step string)

	// Logger receives the middleware's records and the handlers' internal
	// errors. Nil: slog.Default().
	Logger *slog.Logger
}

// The steps of POST /v1/charges reported to Config.OnStep. StepGatewayCalled
// and StepRecorded are also the recovery points it records on its lease.
const (
	// StepGatewayCalled: the recovery point "gateway-called" is recorded;
	// the gateway is about to be called.
	StepGatewayCalled = "gateway-called"
	// StepGatewayAnswered: the gateway charged the card; the charge is not
	// recorded yet.
	StepGatewayAnswered = "gateway-answered"
	// StepRecorded: the charge is recorded and the recovery point
	// "recorded" too; the response is about to be stored.
	StepRecorded = "recorded"
)

// api holds the resolved Config of the handlers.
type api struct {
	backend Backend
	gateway *gatewayClient
	lease   time.Duration
	onStep  func(ctx context.Context, step string)
	log     *slog.Logger
}

// New returns the payments API as an http.Handler:
//
//	GET  /healthz                 200 "ok"
//	PUT  /v1/accounts/{id}        {"balance_cents": N, "currency"?: "EUR"} -> 200 account, 409 currency-conflict
//	GET  /v1/accounts/{id}        -> 200 {"id", "currency", "balance_cents", "payment_count"}
//	POST /v1/payments             {"account_id", "amount_cents", "currency", "reference"?} -> 201 payment
//	POST /v1/charges              {"account_id", "amount_cents", "currency"} -> 201 charge
//
// Every /v1 route needs "Authorization: Bearer <tenant>:<principal>" (a
// demo scheme). Every route takes request bodies of at most 64 KiB (413
// request-too-large beyond, with or without an Idempotency-Key), and every
// error is a problem document (RFC 9457) that says what is wrong in the
// API's terms, 404 not-found and 405 method-not-allowed included. While
// the database cannot be reached (a failover, a restart), every route but
// GET /healthz answers 503 store-unavailable with Retry-After: 1, never 500
// internal; /healthz says that the process is alive. The
// handler is safe for concurrent use. New panics when
// Config.Store is nil and the Backend is a MySQLBackend, or a
// PostgresBackend whose DB is not a server.DB (see Config.Store).
func New(cfg Config) http.Handler {
	if cfg.Backend == nil {
		cfg.Backend = NewMemoryBackend()
	}
	if cfg.Store == nil {
		cfg.Store = defaultStore(cfg.Backend)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Lease <= 0 {
		cfg.Lease = defaultLease
	}
	a := &api{backend: cfg.Backend, lease: cfg.Lease, onStep: cfg.OnStep, log: cfg.Logger}
	mw := server.Config{
		Keys: cfg.Keys, Scope: scope, Retention: cfg.Retention, Lease: cfg.Lease,
		Hooks: cfg.Hooks, Logger: cfg.Logger,
		MaxRequestBytes: maxBodyBytes, // the handlers' own cap: one limit, one answer (413)
	}
	transactional := server.Middleware(cfg.Store, mw)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("PUT /v1/accounts/{id}", authenticate(transactional(http.HandlerFunc(a.putAccount))))
	mux.Handle("GET /v1/accounts/{id}", authenticate(http.HandlerFunc(a.getAccount)))
	mux.Handle("POST /v1/payments", authenticate(transactional(http.HandlerFunc(a.createPayment))))
	if cfg.GatewayURL != "" {
		a.gateway = newGatewayClient(cfg.GatewayURL, cfg.GatewayClient)
		mw.Keys, mw.Mode = server.KeyRequired, server.Leased
		charges := cfg.ChargesStore
		if charges == nil {
			charges = cfg.Store
		}
		mux.Handle("POST /v1/charges", authenticate(server.Middleware(charges, mw)(http.HandlerFunc(a.createCharge))))
	}
	return problemMux(mux)
}

// defaultStore is the Store of a Config without one: the records go
// where the Backend keeps its data, so that both survive a restart, or
// neither does.
func defaultStore(b Backend) server.Store {
	if _, ok := b.(*MySQLBackend); ok {
		panic("api: Config.Store is nil and the Backend is a MySQLBackend: " +
			"set Config.Store to a mysqlidem.Store on the same database")
	}
	pb, ok := b.(*PostgresBackend)
	if !ok {
		return server.NewMemoryStore()
	}
	db, ok := pb.db.(server.DB)
	if !ok {
		panic(fmt.Sprintf("api: Config.Store is nil and the PostgresBackend's DB (a %T) is not a server.DB: "+
			"set Config.Store to a server.PostgresStore on the same database", pb.db))
	}
	return server.NewPostgresStore(db)
}

// step reports a step of POST /v1/charges to Config.OnStep.
func (a *api) step(ctx context.Context, step string) {
	if a.onStep != nil {
		a.onStep(ctx, step)
	}
}

// defaultGatewayClient is the idem client that calls the gateway when
// Config.GatewayClient is nil.
func defaultGatewayClient() *http.Client {
	return idem.NewClient(idem.Config{AttemptTimeout: 2 * time.Second})
}
