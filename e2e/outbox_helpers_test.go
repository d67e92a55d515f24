package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/testserver"
)

// outboxRig is an outbox and its downstream on one database: the
// Receiver of the payments example (server.Middleware over Postgres),
// served behind a testserver that injects the faults of its rules.
type outboxRig struct {
	url      string
	pool     *pgxpool.Pool
	receiver *api.Receiver
	srv      *testserver.Server
	tally    *tally
}

// newOutboxRig applies the outbox's and the Receiver's schemas at dbURL
// and serves the Receiver behind a testserver with cfg.
func newOutboxRig(t *testing.T, dbURL string, cfg testserver.Config, rc api.ReceiverConfig) *outboxRig {
	t.Helper()
	traceRun(t) // the Receiver's records
	r := &outboxRig{url: dbURL, pool: pgtest.NewPool(t, withParams(t, dbURL, map[string]string{"pool_max_conns": "12"})), tally: &tally{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, outbox.Migrate(ctx, r.pool))
	require.NoError(t, api.MigrateReceiver(ctx, r.pool))
	rc.DB, rc.Logger = r.pool, slog.New(slog.DiscardHandler)
	r.receiver = api.NewReceiver(rc)
	r.srv = testserver.New(r.receiver, cfg)
	t.Cleanup(r.srv.Close)
	return r
}

// tally counts an outbox's delivery outcomes, through its Observer.
type tally struct{ delivered, retried, parked atomic.Int64 }

func (c *tally) String() string {
	return fmt.Sprintf("the dispatcher delivered %d, retried %d, parked %d", c.delivered.Load(), c.retried.Load(), c.parked.Load())
}

func (c *tally) observer() outbox.Observer {
	return outbox.Observer{
		Delivered: func(context.Context, outbox.Delivery) { c.delivered.Add(1) },
		Retried:   func(context.Context, outbox.Delivery, time.Duration) { c.retried.Add(1) },
		Parked:    func(context.Context, outbox.Delivery) { c.parked.Add(1) },
	}
}

// notificationKey is the Idempotency-Key of the test's i-th notification.
func notificationKey(i int) string { return fmt.Sprintf("e2e-outbox-%05d", i) }

// paymentID is the payment the i-th notification tells of.
func paymentID(i int) string { return fmt.Sprintf("pay_%05d", i) }

// enqueue stores notifications from..to-1 in transactions of 100 through
// ob (which need not run), and returns their payment ids.
func (r *outboxRig) enqueue(t *testing.T, ob *outbox.Outbox, from, to int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ids []string
	for start := from; start < to; start += 100 {
		err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
			for i := start; i < min(start+100, to); i++ {
				m := api.PaymentCreated(r.srv.URL, api.Payment{ID: paymentID(i), Tenant: "e2e", AccountID: "acc", AmountCents: int64(i + 1), Currency: "EUR"})
				m.Key = notificationKey(i)
				if _, err := ob.Enqueue(ctx, tx, m); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	for i := from; i < to; i++ {
		ids = append(ids, paymentID(i))
	}
	return ids
}

// waitNotified waits until the Receiver recorded n distinct payments, for
// as long as their count grows: it fails when the count did not grow for
// stall (a loaded machine slows the deliveries down; a stuck dispatcher
// stops them), with the dispatcher's tally.
func (r *outboxRig) waitNotified(t *testing.T, n int, stall time.Duration) {
	t.Helper()
	waitGrowing(t, "notifications recorded by the receiver", n, stall, r.distinctNotified, r.tally.String)
}

// waitGrowing polls count until it reaches n, and fails the test with
// diag when it did not grow for stall.
func waitGrowing(t *testing.T, what string, n int, stall time.Duration, count func() (int, error), diag func() string) {
	t.Helper()
	start, grew, last := time.Now(), time.Now(), -1
	for {
		got, err := count()
		require.NoError(t, err)
		if got >= n {
			return
		}
		if got > last {
			grew, last = time.Now(), got
		} else if time.Since(grew) > stall {
			t.Fatalf("%s: %d of %d after %s, none more for %s; %s",
				what, got, n, time.Since(start).Round(time.Millisecond), stall, diag())
		}
		time.Sleep(20 * time.Millisecond) // polling the database, not testing time
	}
}

func (r *outboxRig) distinctNotified() (int, error) {
	var n int
	err := r.pool.QueryRow(context.Background(), "SELECT count(DISTINCT payment_id) FROM payment_notifications").Scan(&n)
	return n, err
}

// requireExactlyOnce checks the Receiver's own records with
// testserver.Check: each payment of ids notified exactly once, none lost,
// none that was not enqueued.
func (r *outboxRig) requireExactlyOnce(t *testing.T, ids []string) testserver.Report {
	t.Helper()
	ns, err := r.receiver.Notifications(context.Background())
	require.NoError(t, err)
	var ledger testserver.Ledger
	for _, n := range ns {
		ledger.Record(n.PaymentID, n.PaymentID)
	}
	var history testserver.History
	for _, id := range ids {
		history.OK(id, id) // committed: it must be delivered, once
	}
	report := testserver.Check(&ledger, &history)
	require.NoError(t, report.Err(), "%s", report)
	require.Equal(t, len(ids), report.Effects, "notifications recorded")
	return report
}

// fastOutbox is a Config for the e2e runs: deliveries with attempts of
// 300 ms, short backoffs and polls, so that thousands of messages through
// faults take seconds. Its faults pass, so every message must be delivered
// and none parked: MaxAttempts is far above what the runs need (a few
// deliveries each) so that a loaded machine, whose attempts time out and
// whose idem client then refuses deliveries (its budget spent, its
// breaker open: they count as deliveries), parks nothing; at 25 it parked
// messages after seconds of such refusals.
func fastOutbox(c *tally) outbox.Config {
	return outbox.Config{
		Client:      clientConfigForOutbox(),
		MaxAttempts: 1000,
		Timeout:     3 * time.Second,
		MinBackoff:  10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		PollInterval: 50 * time.Millisecond, Workers: 40, StopTimeout: 5 * time.Second,
		Observer: c.observer(), Logger: slog.New(slog.DiscardHandler),
	}
}

// outboxAttemptTimeout bounds each HTTP attempt of a delivery.
const outboxAttemptTimeout = 300 * time.Millisecond

// clientConfigForOutbox is the idem client of the e2e dispatchers: the
// e2e clients' settings (clientConfig), with two requests per delivery
// (the outbox retries the rest), on a transport of its own.
func clientConfigForOutbox() idem.Config {
	cfg := clientConfig(outboxAttemptTimeout)
	cfg.MaxAttempts = 2
	cfg.Base = http.DefaultTransport.(*http.Transport).Clone()
	return cfg
}
