package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// receiverSchema is the table of a Postgres-backed Receiver: one row per
// notification recorded, with no unique constraint of its own, so that a
// notification recorded twice would show (the idempotency middleware is
// what keeps it at one).
const receiverSchema = `
CREATE TABLE IF NOT EXISTS payment_notifications (
    idempotency_key text        NOT NULL,
    event           text        NOT NULL,
    payment_id      text        NOT NULL,
    tenant          text        NOT NULL,
    account_id      text        NOT NULL DEFAULT '',
    amount_cents    bigint      NOT NULL,
    currency        text        NOT NULL DEFAULT '',
    received_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Only when missing: ADD COLUMN IF NOT EXISTS and CREATE INDEX IF NOT
-- EXISTS lock the table even then. A table of an older version, without
-- account_id and currency, gets them ('' in its rows). The stronger lock
-- first: taking ALTER TABLE's after the index's could deadlock with a
-- request in flight.
DO $$
BEGIN
    IF (SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema()
        AND table_name = 'payment_notifications' AND column_name IN ('account_id', 'currency')) < 2 THEN
        ALTER TABLE payment_notifications ADD COLUMN IF NOT EXISTS account_id text NOT NULL DEFAULT '',
                                          ADD COLUMN IF NOT EXISTS currency text NOT NULL DEFAULT '';
    END IF;
    IF to_regclass(format('%I.payment_notifications_payment', current_schema())) IS NULL THEN
        CREATE INDEX payment_notifications_payment ON payment_notifications (payment_id);
    END IF;
END $$;
`

// receiverLock serialises concurrent MigrateReceiver calls.
const receiverLock = 0x72656365697665 // "receive"

// MigrateReceiver creates the tables of a Postgres-backed Receiver
// (server.Migrate's, and payment_notifications) if they are missing, and
// adds to a payment_notifications of an older version the columns it
// lacks. It is idempotent and safe to call from several processes at
// once.
func MigrateReceiver(ctx context.Context, db DB) error {
	if err := server.Migrate(ctx, db); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(receiverLock)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, receiverSchema)
		return err
	})
	if err != nil {
		return fmt.Errorf("api: migrate receiver: %w", err)
	}
	return nil
}

// Notification is a payment.created notification, as the payments API
// sends it through its outbox and a Receiver records it.
type Notification struct {
	Event       string `json:"event"`
	PaymentID   string `json:"payment_id"`
	Tenant      string `json:"tenant"`
	AccountID   string `json:"account_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	// Key is the Idempotency-Key it was received with (not in the body).
	Key string `json:"-"`
}

// ReceiverConfig configures a Receiver. Its zero value records in memory.
type ReceiverConfig struct {
	// DB is where notifications are recorded (payment_notifications, see
	// MigrateReceiver), in the idempotency middleware's transaction. Nil:
	// in memory.
	DB DB
	// Store keeps the idempotency records. Nil: a server.PostgresStore on
	// DB (which must then be a server.DB, as *pgxpool.Pool is), or a
	// server.MemoryStore without DB.
	Store server.Store
	// OnNotification, when set, is called before a notification is
	// recorded; tests hold a delivery there.
	OnNotification func(ctx context.Context, n Notification)
	// Logger: nil is slog.Default().
	Logger *slog.Logger
}

// Receiver is the downstream service of the payments example: it records
// each payment.created notification once, whatever the retries, because
// POST /v1/notifications runs under server.Middleware (Transactional, a
// key required): a retry with the same Idempotency-Key gets the stored
// 201 and records nothing. It is safe for concurrent use.
//
// It is a demo downstream, not a service to expose: neither route
// authenticates its caller, and GET /v1/notifications lists every
// tenant's notifications (their payment ids, accounts and amounts) to
// anyone who can reach it (?tenant= narrows it to one tenant's, for a
// walk-through on a database that a demo filled), so that the demo and
// the tests can check what arrived. A real receiver authenticates the dispatcher (a credential in
// outbox.Config.Client.Base, see outbox.Message.Header) and scopes any
// listing to its caller.
type Receiver struct {
	h      http.Handler
	cfg    ReceiverConfig
	mu     sync.Mutex
	memory []Notification // without a DB
}

// NewReceiver returns a Receiver:
//
//	POST /v1/notifications  {"event": "payment.created", "payment_id", ...} -> 201, 400 on a bad body
//	GET  /v1/notifications  -> 200 {"count": N, "notifications": [...]} (every recording, oldest first;
//	                           ?tenant=T: only tenant T's)
//	GET  /healthz           200 "ok"
func NewReceiver(cfg ReceiverConfig) *Receiver {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Store == nil {
		cfg.Store = server.NewMemoryStore()
		if db, ok := cfg.DB.(server.DB); ok {
			cfg.Store = server.NewPostgresStore(db)
		}
	}
	rc := &Receiver{cfg: cfg}
	mw := server.Middleware(cfg.Store, server.Config{Logger: cfg.Logger, MaxRequestBytes: maxBodyBytes})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("POST /v1/notifications", mw(http.HandlerFunc(rc.receive)))
	mux.HandleFunc("GET /v1/notifications", rc.list)
	rc.h = problemMux(mux)
	return rc
}

// ServeHTTP serves the Receiver's routes.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) { rc.h.ServeHTTP(w, r) }

func (rc *Receiver) receive(w http.ResponseWriter, r *http.Request) {
	var n Notification
	if !decodeJSON(w, r, &n) {
		return
	}
	if n.Event != EventPaymentCreated || n.PaymentID == "" {
		badRequest(w, `the body must be {"event": "payment.created", "payment_id": ...}`)
		return
	}
	n.Key, _ = wire.ParseKey(r.Header.Get(wire.HeaderKey))
	if rc.cfg.OnNotification != nil {
		rc.cfg.OnNotification(r.Context(), n)
	}
	if err := rc.record(r.Context(), n); err != nil {
		serverError(w, r, rc.cfg.Logger, err, "the notification was not recorded")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"payment_id": n.PaymentID, "status": "recorded"})
}

func (rc *Receiver) list(w http.ResponseWriter, r *http.Request) {
	ns, err := rc.notifications(r.Context(), r.URL.Query().Get("tenant"))
	if err != nil {
		serverError(w, r, rc.cfg.Logger, err, "cannot read the notifications")
		return
	}
	type item struct {
		Notification
		Key string `json:"idempotency_key"`
	}
	items := make([]item, len(ns))
	for i, n := range ns {
		items[i] = item{n, n.Key}
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": len(ns), "notifications": items})
}

func (rc *Receiver) record(ctx context.Context, n Notification) error {
	if rc.cfg.DB == nil {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.memory = append(rc.memory, n)
		return nil
	}
	const q = `INSERT INTO payment_notifications (idempotency_key, event, payment_id, tenant, account_id, amount_cents, currency)
	           VALUES ($1, $2, $3, $4, $5, $6, $7)`
	insert := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, q, n.Key, n.Event, n.PaymentID, n.Tenant, n.AccountID, n.AmountCents, n.Currency)
		return err
	}
	if tx, ok := server.Tx(ctx); ok { // the middleware's transaction
		return insert(tx)
	}
	return pgx.BeginFunc(ctx, rc.cfg.DB, insert)
}

// Notifications returns every notification recorded, oldest first (one
// row per recording: a notification recorded twice shows twice).
func (rc *Receiver) Notifications(ctx context.Context) ([]Notification, error) {
	return rc.notifications(ctx, "")
}

// notifications returns the notifications of tenant recorded, oldest
// first; every tenant's when tenant is empty.
func (rc *Receiver) notifications(ctx context.Context, tenant string) ([]Notification, error) {
	if rc.cfg.DB == nil {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		var ns []Notification
		for _, n := range rc.memory {
			if tenant == "" || n.Tenant == tenant {
				ns = append(ns, n)
			}
		}
		return ns, nil
	}
	rows, err := rc.cfg.DB.Query(ctx, `SELECT idempotency_key, event, payment_id, tenant, account_id, amount_cents, currency
	                                    FROM payment_notifications WHERE $1 = '' OR tenant = $1 ORDER BY received_at`, tenant)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Notification, error) {
		var n Notification
		err := row.Scan(&n.Key, &n.Event, &n.PaymentID, &n.Tenant, &n.AccountID, &n.AmountCents, &n.Currency)
		return n, err
	})
}

// EventPaymentCreated names the notification of a payment made.
const EventPaymentCreated = "payment.created"

// notification returns the message body of p's payment.created.
func notification(p Payment) []byte {
	b, _ := json.Marshal(Notification{Event: EventPaymentCreated, PaymentID: p.ID, Tenant: p.Tenant,
		AccountID: p.AccountID, AmountCents: p.AmountCents, Currency: p.Currency})
	return b
}
