package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// newReceiver returns a Receiver over the named backend.
func newReceiver(t *testing.T, backend string) *Receiver {
	t.Helper()
	cfg := ReceiverConfig{Logger: quietLogger()}
	if backend == "postgres" {
		pool := pgtest.Pool(t)
		require.NoError(t, MigrateReceiver(context.Background(), pool))
		cfg.DB = pool
	}
	return NewReceiver(cfg)
}

// The Receiver records a notification once per key, refuses a body that
// is not a payment.created, and lists what it recorded.
func TestReceiverRecordsEachNotificationOnce(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			rc := newReceiver(t, backend)
			body := string(notification(Payment{ID: "pay_1", Tenant: "acme", AccountID: "acc-1", AmountCents: 5, Currency: "EUR"}))
			post := call{method: "POST", path: "/v1/notifications", token: "-", key: "n-1", body: body}
			first := do(t, rc, post)
			require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
			again := do(t, rc, post)
			require.Equal(t, http.StatusCreated, again.Code)
			require.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
			require.Equal(t, http.StatusBadRequest, do(t, rc, call{method: "POST", path: "/v1/notifications", token: "-",
				key: "n-2", body: `{"event":"payment.refunded","payment_id":"pay_1"}`}).Code)
			require.Equal(t, http.StatusBadRequest, do(t, rc, call{method: "POST", path: "/v1/notifications", token: "-",
				body: body}).Code, "a key is required")

			ns, err := rc.Notifications(context.Background())
			require.NoError(t, err)
			require.Len(t, ns, 1)
			require.Equal(t, Notification{Event: EventPaymentCreated, PaymentID: "pay_1", Tenant: "acme", AmountCents: 5, Key: "n-1",
				AccountID: "acc-1", Currency: "EUR"}, ns[0], "every field of the notification is kept")

			list := do(t, rc, call{method: "GET", path: "/v1/notifications", token: "-"})
			var got struct {
				Count int `json:"count"`
			}
			require.NoError(t, json.Unmarshal(list.Body.Bytes(), &got))
			require.Equal(t, 1, got.Count)
		})
	}
}

// GET /v1/notifications?tenant=T lists tenant T's notifications only: a
// walk-through on a database that the demo filled sees its own.
func TestReceiverListsOneTenant(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			rc := newReceiver(t, backend)
			for i, tenant := range []string{"demo-1-idem", "acme", "demo-1-idem", "acme-2"} {
				body := string(notification(Payment{ID: fmt.Sprintf("pay_%d", i), Tenant: tenant, AccountID: "acc-1", AmountCents: 5, Currency: "EUR"}))
				rec := do(t, rc, call{method: "POST", path: "/v1/notifications", token: "-", key: fmt.Sprintf("n-%d", i), body: body})
				require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
			}
			list := func(query string) (ids []string) {
				rec := do(t, rc, call{method: "GET", path: "/v1/notifications" + query, token: "-"})
				require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
				var got struct {
					Count         int `json:"count"`
					Notifications []struct {
						PaymentID string `json:"payment_id"`
					} `json:"notifications"`
				}
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
				for _, n := range got.Notifications {
					ids = append(ids, n.PaymentID)
				}
				require.Equal(t, len(ids), got.Count)
				return ids
			}
			require.Equal(t, []string{"pay_1"}, list("?tenant=acme"))
			require.Equal(t, []string{"pay_0", "pay_2"}, list("?tenant=demo-1-idem"))
			require.Empty(t, list("?tenant=nobody"))
			require.Equal(t, []string{"pay_0", "pay_1", "pay_2", "pay_3"}, list(""), "no filter: every tenant's")
		})
	}
}

// A payment_notifications table of an older version (no account_id and
// currency) gets both from MigrateReceiver; its rows read empty strings
// for them.
func TestMigrateReceiverAddsTheColumnsOfAnOlderTable(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE payment_notifications (idempotency_key text NOT NULL, event text NOT NULL,
		payment_id text NOT NULL, tenant text NOT NULL, amount_cents bigint NOT NULL,
		currency text NOT NULL DEFAULT '', -- one of the two added by hand
		received_at timestamptz NOT NULL DEFAULT clock_timestamp());
		INSERT INTO payment_notifications (idempotency_key, event, payment_id, tenant, amount_cents)
		VALUES ('old', 'payment.created', 'pay_0', 'acme', 7)`)
	require.NoError(t, err)
	require.NoError(t, MigrateReceiver(ctx, pool))
	require.NoError(t, MigrateReceiver(ctx, pool), "again: idempotent")
	rc := NewReceiver(ReceiverConfig{Logger: quietLogger(), DB: pool})
	ns, err := rc.Notifications(ctx)
	require.NoError(t, err)
	require.Equal(t, []Notification{{Event: EventPaymentCreated, PaymentID: "pay_0", Tenant: "acme", AmountCents: 7, Key: "old"}}, ns)
}

// A payment enqueues its payment.created in its own transaction: one
// message per payment made, none for a payment refused (402) or a request
// whose transaction rolled back.
func TestPaymentsNotifyThroughTheOutbox(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	require.NoError(t, Migrate(ctx, pool))
	require.NoError(t, outbox.Migrate(ctx, pool))
	ob, err := outbox.New(pool, outbox.Config{Logger: quietLogger()})
	require.NoError(t, err)
	h := New(Config{Logger: quietLogger(), Backend: NewPostgresBackend(pool).NotifyTo(ob, "http://127.0.0.1:9"),
		Store: server.NewPostgresStore(pool)})
	require.Equal(t, http.StatusOK, do(t, h, call{method: "PUT", path: "/v1/accounts/acc-1", body: `{"balance_cents": 100}`}).Code)

	pay := func(key string, cents int64) int {
		return do(t, h, call{method: "POST", path: "/v1/payments", key: key,
			body: `{"account_id":"acc-1","amount_cents":` + itoa(cents) + `,"currency":"EUR"}`}).Code
	}
	require.Equal(t, http.StatusCreated, pay("k1", 60))
	require.Equal(t, http.StatusCreated, pay("k1", 60)) // a replay enqueues nothing
	require.Equal(t, http.StatusPaymentRequired, pay("k2", 60))
	require.Equal(t, http.StatusBadRequest, pay("k3", 0))
	st, err := ob.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Pending, "messages enqueued")

	// The message's key derives from the payment's operation.
	key := outbox.DeriveKey(server.Operation{Tenant: "acme", Principal: "alice", Route: "POST /v1/payments", Key: "k1"},
		EventPaymentCreated)
	m, err := ob.LookupKey(ctx, key)
	require.NoError(t, err)
	require.Equal(t, key, m.Message.Key)
}

// The memory backend enqueues atomically with the payment, and not for a
// refused one.
func TestMemoryPaymentsNotify(t *testing.T) {
	delivered := make(chan string, 4)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered <- r.Header.Get("Idempotency-Key")
		w.WriteHeader(http.StatusCreated)
	}))
	defer rc.Close()
	q := outbox.NewMemory(outbox.Config{Logger: quietLogger()})
	h := New(Config{Logger: quietLogger(), Backend: NewMemoryBackend().NotifyTo(q, rc.URL)})
	require.Equal(t, http.StatusOK, do(t, h, call{method: "PUT", path: "/v1/accounts/acc-1", body: `{"balance_cents": 100}`}).Code)
	require.Equal(t, http.StatusCreated, do(t, h, call{method: "POST", path: "/v1/payments", key: "k1",
		body: `{"account_id":"acc-1","amount_cents":60,"currency":"EUR"}`}).Code)
	require.Equal(t, http.StatusPaymentRequired, do(t, h, call{method: "POST", path: "/v1/payments", key: "k2",
		body: `{"account_id":"acc-1","amount_cents":60,"currency":"EUR"}`}).Code)
	require.Equal(t, 1, q.Pending())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- q.Run(ctx) }()
	select {
	case key := <-delivered:
		require.True(t, strings.HasPrefix(key, "ob1-"), "key %q", key)
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	cancel()
	require.NoError(t, <-done)
}
