package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/outbox"
)

// startNotify wires -notify: every payment enqueues a payment.created
// notification to the receiver at o.notify, in the payment's transaction
// (in memory: atomically with it), and a dispatcher in this process
// delivers them until ctx is done or stop is called. With Postgres, more dispatchers may
// run beside it (go run ./examples/payments/dispatcher). stop waits for
// the dispatcher to finish. ob is the outbox, for the admin page; nil
// without -notify.
func startNotify(ctx context.Context, o options, cfg *api.Config, log *slog.Logger) (ob admin.Outbox, stop func(), err error) {
	if o.notify == "" {
		return nil, func() {}, nil
	}
	run := func(ctx context.Context) error { return nil }
	closePool := func() {}
	switch b := cfg.Backend.(type) {
	case *api.MemoryBackend:
		q := outbox.NewMemory(outbox.Config{Logger: log})
		b.NotifyTo(q, o.notify)
		run, ob = q.Run, q
	case *api.PostgresBackend:
		pool, err := pgxpool.New(ctx, o.db)
		if err != nil {
			return nil, nil, fmt.Errorf("-notify: %w", err)
		}
		pg, err := openOutbox(ctx, pool, log)
		if err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("-notify: %w", err)
		}
		b.NotifyTo(pg, o.notify)
		run, closePool, ob = pg.Run, pool.Close, pg
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := run(ctx); err != nil {
			log.Error("payments server: dispatcher", "error", err)
		}
	}()
	return ob, func() { cancel(); <-done; closePool() }, nil
}

func openOutbox(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (*outbox.Outbox, error) {
	if err := outbox.Migrate(ctx, pool); err != nil {
		return nil, err
	}
	return outbox.New(pool, outbox.Config{Logger: log})
}
