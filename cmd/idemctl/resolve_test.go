package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// makeUncertain runs a reconciler that never knows, with a MaxAge every
// abandoned operation has reached, until n operations were left uncertain.
func makeUncertain(t *testing.T, store server.Store, n int) {
	t.Helper()
	parked := make(chan struct{}, n)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.RunReconciler(ctx, store, server.ReconcileConfig{MaxAge: time.Nanosecond, Interval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
			Routes: map[string]server.ReconcileFunc{"POST /v1/charges": func(context.Context, *server.Abandoned) (server.Settlement, error) {
				return server.Settlement{Answer: server.NotKnown}, nil
			}},
			Hooks: server.ReconcileHooks{Parked: func(context.Context, server.ReconcileEvent) { parked <- struct{}{} }}})
	}()
	for range n {
		select {
		case <-parked:
		case <-time.After(30 * time.Second):
			t.Fatal("the reconciler left nothing uncertain")
		}
	}
	cancel()
	<-done
}

func TestInFlightListsUncertainAndResolve(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	require.NoError(t, server.Migrate(context.Background(), pool))
	charges(t, pool, "stuck-a", "stuck-b", "done-1")
	makeUncertain(t, server.NewPostgresStore(pool), 2)

	code, out, _ := ctl(t, db, "", "inflight")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "stuck-a")
	assert.Contains(t, out, "UNCERTAIN")
	code, out, _ = ctl(t, db, "", withScope("key", "stuck-a")...)
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "409 outcome-uncertain")

	code, _, errOut := ctl(t, db, "", withScope("resolve", "-yes", "-by", "ops", "-reason", "T-1", "stuck-a")...)
	assert.Equal(t, exitUsage, code, "neither -applied nor -not-applied: %s", errOut)
	code, _, errOut = ctl(t, db, "", withScope("resolve", "-yes", "-not-applied", "-by", "ops", "-reason", "T-1", "done-1")...)
	assert.Equal(t, exitRefused, code, "a done record is not uncertain: %s", errOut)
	assert.Contains(t, errOut, "not uncertain")

	code, out, errOut = ctl(t, db, "", withScope("resolve", "-yes", "-applied", "-status", "201", "-body", `{"charge_id":"ch_1"}`,
		"-by", "ops@acme", "-reason", "T-1: the gateway has ch_1", "stuck-a")...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "is now done")
	code, out, errOut = ctl(t, db, "", withScope("resolve", "-yes", "-not-applied", "-by", "ops@acme", "-reason", "T-2", "stuck-b")...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "is now not-applied")
	code, out, _ = ctl(t, db, "", withScope("key", "stuck-a")...)
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "resolved by ops@acme")
	code, out, _ = ctl(t, db, "", "inflight")
	require.Equal(t, exitOK, code)
	assert.NotContains(t, out, "UNCERTAIN")
}
