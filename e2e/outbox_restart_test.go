//go:build unix

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgcluster"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/testserver"
)

// TestOutboxPostgresRestart: a private PostgreSQL cluster, which holds both
// the outbox and the Receiver's records, is restarted (pg_ctl restart -m
// fast) while a dispatcher delivers 1,000 notifications. The dispatcher
// recovers by itself: every notification, and 100 more enqueued after the
// restart, is recorded exactly once.
func TestOutboxPostgresRestart(t *testing.T) {
	pg := pgcluster.Start(t, pgcluster.Config{})
	rig := newOutboxRig(t, pg.URL(), testserver.Config{}, api.ReceiverConfig{})
	cfg := fastOutbox(rig.tally)
	cfg.RescueAfter = rescueAfter
	ob, err := outbox.New(rig.pool, cfg)
	require.NoError(t, err)
	const n = 1000
	ids := rig.enqueue(t, ob, 0, n)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	for start := time.Now(); rig.tally.delivered.Load() < n/4; {
		require.Less(t, time.Since(start), time.Minute, "no progress before the restart")
		time.Sleep(time.Millisecond) // waiting for progress, not testing time
	}
	require.NoError(t, pg.Restart())
	restartedAt := rig.tally.delivered.Load()
	// The test's own statements from here on (the enqueue that stands for
	// the API's payments, the counts it polls) go through a pool opened
	// after the restart: an idle connection from before it fails its next
	// statement (57P01), as an API's request would, and its client would
	// retry. The dispatcher and the receiver keep the pool they had.
	rig.pool = pgtest.NewPool(t, pg.URL())
	require.Less(t, restartedAt, int64(n), "every message was delivered before the restart")

	ids = append(ids, rig.enqueue(t, ob, n, n+100)...)
	rig.waitNotified(t, n+100, 2*time.Minute)
	rig.requireExactlyOnce(t, ids)
	t.Logf("Postgres restarted after %d deliveries; %d River-level retries", restartedAt, rig.tally.retried.Load())
}
