//go:build unix

package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgcluster"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/testserver"
)

// The database-fault runs: dbFaultOps payments on dbFaultWorkers
// goroutines through a plain balancer over two nodes, with the client of
// the crash runs.
const (
	dbFaultOps     = 400
	dbFaultWorkers = 8
)

// dbFaultClient is the payer of the database-fault runs.
func dbFaultClient(url string) *payer {
	return newPayer(url, clientConfig(2*time.Second), 10*time.Second, 30*time.Second)
}

// TestTerminatedBackends: while clients make payments, the backends of
// the nodes' in-flight transactions (found by the application_name of
// their pools) are terminated one at a time, again and again: during the
// claim, the handler's mutation, or the commit. Afterwards each payment
// took effect exactly once, ended as designed, and the balances add up.
func TestTerminatedBackends(t *testing.T) {
	seed := testserver.Seed(t)
	traceRun(t)
	db := openDatabase(t, pgtest.SchemaURL(t))
	ns := startNodes(t, db.url, 2, api.Config{})
	proxy := balancer(t, ns, testserver.Config{})
	ops := workload(seed, dbFaultOps)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Every terminateEvery payments done, the terminator strikes once:
	// the pace follows the load, however fast the machine is.
	strike, loadDone, terminated := make(chan struct{}, 1), make(chan struct{}), make(chan int, 1)
	go func() { terminated <- terminateInFlight(ctx, t, db, ns.appName, strike, loadDone) }()
	verdicts := runLoad(ctx, dbFaultClient(proxy.URL), ops, dbFaultWorkers, func(done int) {
		if done%terminateEvery == 0 {
			select {
			case strike <- struct{}{}:
			default: // the terminator is still at the previous strike
			}
		}
	})
	close(loadDone)
	require.NoError(t, ctx.Err(), "the payments did not finish within 2 minutes")
	kills := <-terminated
	proxy.Close()
	ns.close()

	require.GreaterOrEqual(t, kills, 10, "in-flight transactions terminated, want enough to mean something")
	requireDesigned(t, ops, verdicts, 0)
	requireExactlyOnce(t, db, seed, ops, verdicts, "")
	t.Logf("%d in-flight transactions terminated during %d payments", kills, len(ops))
}

// terminateEvery paces the terminations: often enough to hit every step
// of a payment many times in a run, rarely enough that most payments run
// untouched.
const terminateEvery = 8

// terminateInFlight terminates, at each strike until stop, the backend of
// one transaction in progress on a connection whose application_name
// starts with appName, and returns how many it terminated.
func terminateInFlight(ctx context.Context, t *testing.T, db *database, appName string, strike, stop <-chan struct{}) int {
	const sql = `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM (
		SELECT pid FROM pg_stat_activity
		WHERE application_name LIKE $1 AND xact_start IS NOT NULL AND pid <> pg_backend_pid()
		ORDER BY random() LIMIT 1) AS victim`
	var total int
	for {
		select {
		case <-stop:
			return total
		case <-ctx.Done():
			return total
		case <-strike:
		}
		var n int
		if err := db.pool.QueryRow(ctx, sql, appName+"-%").Scan(&n); err != nil && ctx.Err() == nil {
			t.Errorf("terminating a backend: %v", err)
			return total
		}
		total += n
	}
}

// TestPostgresRestart: a private PostgreSQL cluster is restarted (pg_ctl
// restart -m fast) while clients make payments through two nodes. The load
// goes on through the outage; afterwards each payment took effect exactly
// once and ended as designed, the balances add up, and the nodes serve new
// payments.
func TestPostgresRestart(t *testing.T) {
	pg := pgcluster.Start(t, pgcluster.Config{})
	seed := testserver.Seed(t)
	traceRun(t)
	db := openDatabase(t, pg.URL())
	ns := startNodes(t, db.url, 2, api.Config{})
	proxy := balancer(t, ns, testserver.Config{})
	p := dbFaultClient(proxy.URL)
	ops := workload(seed, dbFaultOps)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := postmasterStart(ctx, t, db)

	onDone, restarted := restartAfter(ctx, pg, len(ops)/3)
	verdicts := runLoad(ctx, p, ops, dbFaultWorkers, onDone)
	require.NoError(t, ctx.Err(), "the payments did not finish within 2 minutes")
	back, err := restarted()
	require.NoError(t, err)
	require.NotEqual(t, before, postmasterStart(ctx, t, db), "the postmaster's start time, want a new one after the restart")
	require.Less(t, back, int64(len(ops)), "payments done when Postgres was back, want the load still running")
	retried := retriedOps(p, ops)
	require.NotZero(t, retried, "no payment was retried: the load did not feel the restart")
	t.Logf("Postgres restarted after %d payments, back after %d; %d payments retried", len(ops)/3, back, retried)

	fresh := workload(seed+1, 50)
	freshVerdicts := runLoad(ctx, p, fresh, dbFaultWorkers, nil)
	proxy.Close()
	ns.close()
	requireDesigned(t, fresh, freshVerdicts, 0)
	requireDesigned(t, ops, verdicts, 0)
	requireExactlyOnce(t, db, seed, append(ops, fresh...), append(verdicts, freshVerdicts...), "")
}

// restartAfter returns an onDone for runLoad that restarts pg once n
// payments are done, in a goroutine of its own so that the load goes on,
// and restarted, which waits for the restart and returns its error and how
// many payments were done when Postgres accepted connections again.
func restartAfter(ctx context.Context, pg *pgcluster.Cluster, n int) (onDone func(int), restarted func() (int64, error)) {
	begin, end := make(chan struct{}), make(chan error, 1)
	var finished, back atomic.Int64
	go func() {
		select {
		case <-begin:
			err := pg.Restart()
			back.Store(finished.Load())
			end <- err
		case <-ctx.Done():
			end <- ctx.Err()
		}
	}()
	onDone = func(int) {
		if finished.Add(1) == int64(n) {
			close(begin)
		}
	}
	return onDone, func() (int64, error) { err := <-end; return back.Load(), err }
}

// postmasterStart returns when the database server started.
func postmasterStart(ctx context.Context, t *testing.T, db *database) time.Time {
	t.Helper()
	var start time.Time
	require.NoError(t, db.pool.QueryRow(ctx, `SELECT pg_postmaster_start_time()`).Scan(&start))
	return start
}
