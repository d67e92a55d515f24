//go:build unix

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgcluster"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/testserver"
)

// The failover runs: failoverOps payments on failoverWorkers goroutines
// through the idem client, each call bounded by failoverDeadline and never
// resent by the application during the load (so that an operation's
// verdict is the client's own); the primary dies once killAt of them are
// done, and the standby is promoted promoteAfter later. The asynchronous
// run stalls the primary's WAL sender once stallAt are done: what commits
// from then on is answered and never reaches the standby.
const (
	failoverOps      = 900
	failoverWorkers  = 12
	failoverDeadline = 10 * time.Second
	killAt           = 300
	stallAt          = 200
	promoteAfter     = time.Second
	// Every impatientEvery-th operation is an impatient caller's, whose
	// calls end after impatientDeadline, shorter than the outage: those in
	// flight at the kill end unknown, and are resent with their key.
	impatientEvery    = 4
	impatientDeadline = 500 * time.Millisecond
	// freshOps are made after the load, through the same server, once it
	// serves again: each must end as designed.
	freshOps = 100
	// servingBound is how soon after its promotion the standby must serve
	// the API, through the same server process.
	servingBound = time.Second
)

// TestFailover: a primary and a streaming standby (private clusters, see
// internal/pgcluster), the server program (examples/payments/server) on a
// pgx multi-host URL with target_session_attrs=read-write, keyed payments
// through the idem client; the primary is killed with SIGKILL (the
// postmaster and every backend at once) and the standby promoted.
//
// With synchronous replication (synchronous_standby_names '*',
// synchronous_commit on) the promise holds across the failover: no
// operation took effect twice, none answered ok is lost, every unknown
// outcome is resolved by a resend with its key, and the server serves
// again within servingBound of the promotion without a restart.
//
// With asynchronous replication and a stalled WAL sender, operations
// already answered ok are lost by the failover (the test requires some: the
// stall must bite), but none is doubled: an operation's effects and its
// stored response commit in one transaction, so the failover keeps or
// loses them together, and a retry of a lost one runs it once. See
// docs/replication.md.
//
// Each run logs its figures (BENCHMARKS.md, "Failover"), among them the
// operations that failed (a definite failure that was not designed) and
// how many of them had a deadline that outlasted the outage.
func TestFailover(t *testing.T) {
	pgtest.DatabaseURL(t) // the e2e package's precondition, checked before the build
	bin := buildServerProgram(t)
	t.Run("synchronous", func(t *testing.T) {
		r := runFailover(t, bin, false)
		r.requireKept(t)
	})
	t.Run("asynchronous-stalled", func(t *testing.T) {
		r := runFailover(t, bin, true)
		r.requireNoDoubles(t)
	})
}

// failoverRun is what a failover run saw: its operations and how each went,
// the faults' times, and the checker's report on the promoted database.
type failoverRun struct {
	seed     uint64
	ops      []operation
	load     []timed     // the client's verdicts during the load
	resent   []int       // the operations whose outcome was unknown, resent with their key
	final    []verdict   // the load's verdicts, with the resends' for the resent
	fresh    []operation // made once the API served again
	faults   *faultTimes
	report   testserver.Report
	payer    *payer // the load's
	retried  int    // operations that put more than one request on the wire
	serverOK bool
	log      string // the server's log, for failure messages
}

// runFailover runs the load over a primary and a standby, kills the
// primary, promotes the standby, resends the unknown operations with their
// keys and checks the promoted database.
func runFailover(t *testing.T, bin string, async bool) *failoverRun {
	t.Helper()
	names := "*"
	if async {
		names = ""
	}
	primary := pgcluster.Start(t, pgcluster.Config{Settings: map[string]string{"synchronous_standby_names": names}})
	standby := primary.Standby(t, pgcluster.Config{})
	r := &failoverRun{seed: testserver.Seed(t)}
	r.ops = workload(r.seed, failoverOps)
	for i := impatientEvery - 1; i < len(r.ops); i += impatientEvery {
		r.ops[i].deadline = impatientDeadline
	}
	setup := openDatabase(t, primary.URL())
	waitReplayed(t, standby, len(initialBalances()))
	setup.pool.Close() // its connections die with the primary

	addr := freeAddr(t)
	cluster := fmt.Sprintf("postgres://postgres@%s,%s/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Addr(), standby.Addr())
	sup := supervise(t, bin, nil, "-addr", addr, "-db", cluster)
	url := "http://" + addr

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plan := faultPlan{killAt: killAt, promoteAfter: promoteAfter}
	if async {
		plan.stallAt = stallAt
	}
	faults, onDone := plan.run(ctx, primary, standby, url)
	r.payer = newPayer(url, failoverClient(), failoverDeadline, 0)
	r.load = runTimedLoad(ctx, r.payer, r.ops, failoverWorkers, onDone)
	r.faults = faults.wait()
	require.NoError(t, ctx.Err(), "the payments did not finish within 2 minutes; log:\n%s", sup.logTail())
	require.NoError(t, r.faults.err, "the faults; log:\n%s", sup.logTail())
	r.retried = retriedOps(r.payer, r.ops)
	after := newPayer(url, failoverClient(), failoverDeadline, 30*time.Second) // a client whose breaker saw no outage
	r.resend(ctx, t, after)
	r.fresh = workload(r.seed+1, freshOps)
	freshVerdicts := runLoad(ctx, after, r.fresh, failoverWorkers, nil)
	requireDesigned(t, r.fresh, freshVerdicts, 0)

	sup.stop()
	r.log = sup.logText()
	require.Empty(t, sup.exited(), "the server program exited during the run (it must ride the failover out); log:\n%s", sup.logTail())
	requireReplicationReported(t, r.log, async)
	truth := &database{url: standby.URL(), pool: pgtest.NewPool(t, standby.URL())}
	payments := truth.payments(t)
	all := append(slices.Clone(r.ops), r.fresh...)
	r.report = testserver.Check(ledger(payments), history(all, append(slices.Clone(r.final), freshVerdicts...)))
	truth.requireConsistent(t, all, payments)
	r.logFigures(t, async)
	require.NotEmpty(t, r.resent, "no outcome was left unknown, not even an impatient caller's: the load did not feel the failover")
	require.Less(t, r.faults.serving.Sub(r.faults.promoteAsked), servingBound,
		"the server served again %v after the standby's promotion was asked, want under %v", r.faults.serving.Sub(r.faults.promoteAsked), servingBound)
	return r
}

// failoverClient is the client of the failover runs: the library's
// defaults (4 attempts, the default budget and breaker, Retry-After
// honoured) with a 2 s bound per attempt, as an application that did not
// tune it for the test would have. Its failures during the outage are the
// figures that issue 26's waiting client is to bring to zero.
func failoverClient() idem.Config {
	return idem.Config{AttemptTimeout: 2 * time.Second}
}

// resend sends every operation whose outcome the load left unknown again,
// with its key, through p, until its outcome is definite, and
// requires each to end as designed: a replay when it had taken effect, a
// first run when it had not.
func (r *failoverRun) resend(ctx context.Context, t *testing.T, p *payer) {
	t.Helper()
	r.final = verdictsOf(r.load)
	var unknown []operation
	for i, tv := range r.load {
		if tv.kind == testserver.OutcomeUnknown {
			r.resent = append(r.resent, i)
			unknown = append(unknown, r.ops[i])
		}
	}
	resends := runLoad(ctx, p, unknown, failoverWorkers, nil)
	requireDesigned(t, unknown, resends, 0)
	for j, i := range r.resent {
		r.final[i] = resends[j]
	}
}

// requireKept fails the test unless the run kept every promise: no double
// effect, no lost ok, no definite failure that took effect, no effect
// without an operation.
func (r *failoverRun) requireKept(t *testing.T) {
	t.Helper()
	if err := r.report.Err(); err != nil {
		t.Fatalf("exactly-once violated across a synchronous failover (IDEM_SEED=%d):\n%s\n%v", r.seed, r.report, err)
	}
}

// requireNoDoubles fails the test when an operation took effect twice (or
// another promise than "no lost ok" broke), or when no answered operation
// was lost: then the stalled WAL sender did not bite, and the run showed
// nothing of asynchronous replication.
func (r *failoverRun) requireNoDoubles(t *testing.T) {
	t.Helper()
	rep := r.report
	if rep.DoubleEffects+rep.WrongResults+rep.FailedApplied+rep.OrphanEffects > 0 {
		t.Fatalf("a violation other than lost oks across an asynchronous failover (IDEM_SEED=%d):\n%s", r.seed, rep)
	}
	require.NotZero(t, rep.LostOKs, "no answered payment was lost with the WAL sender stalled for %d payments: the stall did not bite\n%s",
		killAt-stallAt, rep)
}

// requireReplicationReported checks that the server logged the durability
// report of its database at start: a risk for asynchronous replication,
// none for synchronous.
func requireReplicationReported(t *testing.T, log string, async bool) {
	t.Helper()
	want := `level=INFO msg=durability setting=synchronous_standby_names value="'*' (1 standbys connected, 1 synchronous)" risk=false`
	if async {
		want = `level=WARN msg=durability setting=synchronous_standby_names value="'' (1 standbys connected, 0 synchronous)" risk=true meaning="asynchronous replication: `
	}
	require.Contains(t, log, want, "the server's durability report")
}
