//go:build unix

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/testserver"
)

// The crash runs: crashOps payments on crashWorkers goroutines; the server
// dies at the crashAfter-th time a payment reaches the crash point, with
// payments in flight and most of the load still to come.
const (
	crashOps     = 200
	crashWorkers = 8
	crashAfter   = 60
)

// TestProcessCrash: the server program (examples/payments/server, on
// Postgres) kills itself with SIGKILL at a step of the idempotency
// middleware while clients make payments: after the claim (the
// transaction is open), after the handler's mutation (not committed), and
// after the commit (the client has not heard). A supervisor restarts it on
// the same address and database; the clients retry through the outage
// (connection refused: not sent). Afterwards every payment ended as
// designed, each took effect exactly once, and the balances add up.
func TestProcessCrash(t *testing.T) {
	pgtest.DatabaseURL(t) // skip (or fail under CI) before the build when there is no database
	bin := buildServerProgram(t)
	for _, at := range []string{"claimed", "handled", "committed"} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			seed := testserver.Seed(t)
			db := openDatabase(t, pgtest.SchemaURL(t))
			addr := freeAddr(t)
			crashSwitch := []string{"IDEM_CRASH_AT=" + at, "IDEM_CRASH_ROUTE=POST /v1/payments", fmt.Sprintf("IDEM_CRASH_AFTER=%d", crashAfter)}
			sup := supervise(t, bin, crashSwitch, "-addr", addr, "-db", db.url)

			ops := workload(seed, crashOps)
			p := newPayer("http://"+addr, clientConfig(2*time.Second), 10*time.Second, 30*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			verdicts := runLoad(ctx, p, ops, crashWorkers, nil)
			require.NoError(t, sup.failed())
			require.NoError(t, ctx.Err(), "the payments did not finish within 2 minutes; log:\n%s", sup.logTail())
			sup.stop()

			exits := sup.exited()
			require.Len(t, exits, 1, "children that died during the run, want the crash alone; log:\n%s", sup.logTail())
			require.True(t, killedBySIGKILL(exits[0]), "the child ended %v, want SIGKILL; log:\n%s", exits[0], sup.logTail())
			require.Contains(t, sup.logText(), "crash switch: SIGKILL", "the crash switch fired")
			requireDesigned(t, ops, verdicts, 0)
			requireExactlyOnce(t, db, seed, ops, verdicts, sup.logTail())
			retried := retriedOps(p, ops)
			require.NotZero(t, retried, "no payment was retried across the crash")
			t.Logf("%d payments retried across the crash at %s, each ok once", retried, at)
		})
	}
}
