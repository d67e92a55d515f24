package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/testserver"
)

// notes is what became of a trial's payment.created notifications.
type notes struct {
	// enqueued counts the payments made: each enqueued one notification
	// in its own transaction (in memory: atomically with it).
	enqueued int
	// delivered counts the outbox's deliveries; twice and lost are the
	// checker's count over the Receiver's records (a payment notified 2+
	// times, a payment never notified and not parked); parked counts the
	// messages the outbox gave up on; attempts counts the requests that
	// reached the fault proxy in front of the Receiver.
	delivered, twice, lost, parked, attempts int
	// off says that no outbox ran (on MySQL): the counts are all zero.
	off bool
}

// violated reports whether the notifications broke the outbox's promise.
func (n notes) violated() bool { return n.twice > 0 || n.lost > 0 }

// dispatcher is either outbox: the Postgres one, or the memory one.
type dispatcher interface {
	Run(ctx context.Context) error
	Parked(ctx context.Context, after int64, limit int) ([]outbox.ParkedMessage, error)
}

// notifier is the demo's outbox side: a dispatcher that delivers the
// payments' notifications through a fault-injecting testserver to the
// Receiver, run in process.
type notifier struct {
	receiver                     *api.Receiver
	srv                          *testserver.Server
	out                          dispatcher
	delivered, parked, attempts  atomic.Int64
	stop                         func() error
	receiverPool, dispatcherPool *pgxpool.Pool // nil in memory
	closePools                   func()
}

// newNotifier serves a Receiver (recording in the database at dbURL, or in
// memory when dbURL is empty) behind a testserver that meets the
// notifications with the demo's mix of faults at rate. On Postgres the
// receiver and the dispatcher have pools of their own, as separate
// services would: they do not take the payments' connections.
func newNotifier(ctx context.Context, dbURL string, seed uint64, rate float64, attemptTimeout time.Duration) (*notifier, error) {
	n := &notifier{closePools: func() {}}
	cfg := api.ReceiverConfig{Logger: slog.New(slog.DiscardHandler)}
	if dbURL != "" {
		if err := n.openPools(ctx, dbURL); err != nil {
			return nil, err
		}
		cfg.DB = n.receiverPool
	}
	n.receiver = api.NewReceiver(cfg)
	n.srv = testserver.New(n.receiver, testserver.Config{Seed: seed, Rules: notificationRules(rate, attemptTimeout),
		MaxEvents: 1, OnEvent: func(testserver.Event) { n.attempts.Add(1) }})
	return n, nil
}

// openPools opens the receiver's pool and the dispatcher's, and applies
// their schemas.
func (n *notifier) openPools(ctx context.Context, dbURL string) error {
	var pools []*pgxpool.Pool
	n.closePools = func() {
		for _, p := range pools {
			p.Close()
		}
	}
	for _, conns := range []int32{16, 10} { // receiver, dispatcher
		cfg, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			return err
		}
		cfg.MaxConns = conns
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			n.closePools()
			return err
		}
		pools = append(pools, p)
	}
	n.receiverPool, n.dispatcherPool = pools[0], pools[1]
	err := api.MigrateReceiver(ctx, n.receiverPool)
	if err == nil {
		err = outbox.Migrate(ctx, n.dispatcherPool)
	}
	if err != nil {
		n.closePools()
	}
	return err
}

// notificationRules meet the deliveries with the payments' mix of faults.
func notificationRules(rate float64, attemptTimeout time.Duration) []testserver.Rule {
	if rate == 0 {
		return nil
	}
	r := testserver.Rule{Name: "notifications", Match: testserver.Match{Method: "POST", Path: "/v1/notifications"}}
	for _, c := range mix(attemptTimeout) {
		r.Mix = append(r.Mix, testserver.Chance{P: c.share * rate, Fault: c.fault})
	}
	return []testserver.Rule{r}
}

// outboxConfig is the demo dispatcher's: attempts bounded like the
// payment clients', short backoffs, the notifier's counters.
func (n *notifier) outboxConfig(attemptTimeout time.Duration) outbox.Config {
	return outbox.Config{
		Client:     idem.Config{AttemptTimeout: attemptTimeout},
		MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, PollInterval: 100 * time.Millisecond,
		Workers: 32, Logger: slog.New(slog.DiscardHandler),
		Observer: outbox.Observer{
			Delivered: func(context.Context, outbox.Delivery) { n.delivered.Add(1) },
			Parked:    func(context.Context, outbox.Delivery) { n.parked.Add(1) },
		},
	}
}

// start runs the dispatcher until stop.
func (n *notifier) start(out dispatcher) {
	n.out = out
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- out.Run(ctx) }()
	n.stop = func() error {
		cancel()
		err := <-done
		n.srv.Close()
		n.closePools()
		return err
	}
}

// settle waits (up to bound) until every notification of the tenant's
// payments was delivered or parked, then checks the Receiver's records
// against the payments. Counts are since before, the counters at the
// trial's start.
func (n *notifier) settle(ctx context.Context, backend api.Backend, tenant string, before notes, bound time.Duration) (notes, error) {
	payments, err := backend.Payments(ctx, tenant)
	if err != nil {
		return notes{}, err
	}
	deadline := time.Now().Add(bound)
	for n.now(before).delivered+n.now(before).parked < len(payments) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // waiting for the dispatcher
	}
	got := n.now(before)
	got.enqueued = len(payments)
	parked, err := n.parkedPayments(ctx)
	if err != nil {
		return notes{}, err
	}
	recorded, err := n.receiver.Notifications(ctx)
	if err != nil {
		return notes{}, err
	}
	var ledger testserver.Ledger
	for _, r := range recorded {
		if r.Tenant == tenant {
			ledger.Record(r.PaymentID, r.PaymentID)
		}
	}
	var history testserver.History
	for _, p := range payments {
		if parked[p.ID] {
			history.Unknown(p.ID, nil) // given up on, visible to an operator: not lost
		} else {
			history.OK(p.ID, p.ID) // committed: must be delivered, once
		}
	}
	report := testserver.Check(&ledger, &history)
	got.twice, got.lost = report.DoubleEffects, report.LostOKs
	return got, nil
}

// now returns the counters since before.
func (n *notifier) now(before notes) notes {
	return notes{
		delivered: int(n.delivered.Load()) - before.delivered, parked: int(n.parked.Load()) - before.parked,
		attempts: int(n.attempts.Load()) - before.attempts,
	}
}

// parkedPayments returns the payments whose notification is parked.
func (n *notifier) parkedPayments(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	var after int64
	for {
		page, err := n.out.Parked(ctx, after, 500)
		if err != nil || len(page) == 0 {
			return out, err
		}
		for _, p := range page {
			var body api.Notification
			_ = json.Unmarshal(p.Message.Body, &body)
			out[body.PaymentID] = true
			after = p.ID
		}
	}
}

// openOutbox makes the storage's backend notify through an outbox of its
// kind, and starts the dispatcher: the Postgres outbox on the dispatcher's
// pool (a payment enqueues in its own transaction, on the API's pool), or
// the memory one.
func (n *notifier) openOutbox(st *storage, attemptTimeout time.Duration) error {
	cfg := n.outboxConfig(attemptTimeout)
	switch b := st.backend.(type) {
	case *api.MemoryBackend:
		q := outbox.NewMemory(cfg)
		b.NotifyTo(q, n.srv.URL)
		n.start(q)
	case *api.PostgresBackend:
		if n.dispatcherPool == nil {
			return fmt.Errorf("a Postgres backend needs a notifier on Postgres")
		}
		ob, err := outbox.New(n.dispatcherPool, cfg)
		if err != nil {
			return err
		}
		b.NotifyTo(ob, n.srv.URL)
		n.start(ob)
	default:
		return fmt.Errorf("no outbox for a %T", st.backend)
	}
	return nil
}
