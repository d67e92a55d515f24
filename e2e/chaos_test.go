package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/testserver"
)

// The chaos client: attempts time out after chaosAttemptTimeout (well
// above a payment's latency under -race on a busy two-core machine, so
// that the timeouts are the faults'), each call gets chaosDeadline, a
// payment whose outcome is still unknown is resent with its key for
// chaosResendFor (as an application that stores its keys does: a call
// may end early on the retry budget or the breaker), and chaosWorkers
// payments are in flight at once.
const (
	chaosAttemptTimeout = time.Second
	chaosDeadline       = 15 * time.Second
	chaosResendFor      = 30 * time.Second
	chaosWorkers        = 16
)

// chaosStall ends a chaos run in which no operation finished for that
// long: each ends within chaosResendFor plus a call's chaosDeadline, so
// such a run is stuck, not slow. A run that makes progress is not bounded
// by the wall clock (a loaded machine slows it down) but by go test's
// -timeout.
const chaosStall = chaosResendFor + chaosDeadline + 15*time.Second

// chaosMix is a seeded mix of every fault kind of testserver: about 15%
// of the attempts meet one. Each kind has 1%: enough for a 2,000-payment
// run to meet each about 20 times, few enough that the faults that cost
// the client a whole attempt timeout (blackhole, drop-hang,
// delay-response, hold) keep the run short.
func chaosMix(attemptTimeout time.Duration) []testserver.Chance {
	const p = 0.01
	f := func(share float64, fault testserver.Fault) testserver.Chance {
		return testserver.Chance{P: share * p, Fault: fault}
	}
	return []testserver.Chance{
		// Before the handler: the payment certainly did not happen.
		f(1, testserver.Fault{Kind: testserver.FaultStatus, Status: 503}),
		f(0.5, testserver.Fault{Kind: testserver.FaultStatus, Status: 429, RetryAfter: time.Second}),
		f(1, testserver.Fault{Kind: testserver.FaultReset}),
		f(1, testserver.Fault{Kind: testserver.FaultClose}),
		f(1, testserver.Fault{Kind: testserver.FaultBlackhole}),
		f(0.5, testserver.Fault{Kind: testserver.FaultDelay, Delay: attemptTimeout / 10}),
		f(0.5, testserver.Fault{Kind: testserver.FaultDelay, Delay: 2 * attemptTimeout}), // the client leaves first
		f(1, testserver.Fault{Kind: testserver.FaultSlowRead, Bytes: 16, Delay: time.Millisecond}),
		// After the handler: the payment happened, the client cannot know.
		f(1, testserver.Fault{Kind: testserver.FaultDropReset}),
		f(1, testserver.Fault{Kind: testserver.FaultDropClose}),
		f(1, testserver.Fault{Kind: testserver.FaultDropHang}),
		f(1, testserver.Fault{Kind: testserver.FaultDelayResponse, Delay: 2 * attemptTimeout}),
		f(1, testserver.Fault{Kind: testserver.FaultPartialBody}),
		f(1, testserver.Fault{Kind: testserver.FaultSlowBody, Bytes: 32, Delay: time.Millisecond}),
		f(1, testserver.Fault{Kind: testserver.FaultStatusAfter, Status: 502}),
		// Races: the attempt is held until its retry arrives, then both
		// run, the first with a head start to the account's row lock, or
		// the retry first. The proxy's round robin is over all requests,
		// so a race's two attempts may meet on one node: TestChaos
		// requires some races to cross the two nodes (crossNodeRaces).
		f(1, testserver.Fault{Kind: testserver.FaultHold, Delay: 5 * time.Millisecond}),
		f(0.5, testserver.Fault{Kind: testserver.FaultHold, RetryFirst: true}),
	}
}

// chaosRules apply the mix to the POSTs to path (the payments, or the
// charges and the gateway's charges).
func chaosRules(path string, attemptTimeout time.Duration) []testserver.Rule {
	return []testserver.Rule{{
		Name:  "chaos",
		Match: testserver.Match{Method: "POST", Path: path},
		Mix:   chaosMix(attemptTimeout),
	}}
}

// chaosRun is one run of the chaos suite and what it left.
type chaosRun struct {
	ops      []operation
	verdicts []verdict
	events   []testserver.Event
	db       *database
}

// runChaos makes n payments of the seed's workload with the idem client,
// through the fault proxy, over two nodes on a fresh schema. It returns
// when every request has settled: the proxy's held, delayed and dropped
// requests, and the nodes' handlers.
func runChaos(t *testing.T, seed uint64, n int) chaosRun {
	t.Helper()
	traceRun(t)
	run := chaosRun{ops: workload(seed, n), db: openDatabase(t, pgtest.SchemaURL(t))}
	ns := startNodes(t, run.db.url, 2, api.Config{})
	proxy := balancer(t, ns, testserver.Config{Seed: seed, Rules: chaosRules("/v1/payments", chaosAttemptTimeout), HoldTimeout: 2 * time.Second})
	p := newPayer(proxy.URL, clientConfig(chaosAttemptTimeout), chaosDeadline, chaosResendFor)

	watch := watchProgress(chaosStall)
	run.verdicts = runLoad(watch.ctx, p, run.ops, chaosWorkers, watch.onDone)
	watch.close()
	if err := watch.err(run.ops, run.verdicts, p.attempts, testserver.Summarize(proxy.Events()).String()); err != nil {
		t.Fatalf("payments (IDEM_SEED=%d): %v", seed, err)
	}
	proxy.Close()
	ns.close()
	run.events = proxy.Events()
	return run
}

// minCoverageOps is the smallest run that must meet every fault kind of
// testserver.Kinds() and a hold race across the nodes: at 1,000 payments
// (some 1,150 attempts) each kind, at 1% of the attempts or more, is
// expected 11 times or more and missed with a chance of about 1 in 100,000
// (0.99^1150), so one of the kinds is missed with a chance of about
// len(testserver.Kinds()) in 100,000; the 17 or so hold races all stay on
// one node with a chance of about 1 in 2^17 (a seed that misses, misses
// again on a rerun).
const minCoverageOps = 1000

// TestChaos: through a seeded mix of every fault, each payment takes
// effect at most once, each ok is a payment made, each definite failure
// made none, the balances add up, and nearly every payment ends as
// designed.
func TestChaos(t *testing.T) {
	seed := testserver.Seed(t)
	run := runChaos(t, seed, chaosOps(t))
	summary := testserver.Summarize(run.events)
	requireExactlyOnce(t, run.db, seed, run.ops, run.verdicts, summary.String())
	requireDesigned(t, run.ops, run.verdicts, len(run.ops)/100)
	if len(run.ops) < minCoverageOps {
		t.Logf("event log (%d payments: too few to require every fault kind):\n%s", len(run.ops), summary)
		return
	}
	for _, kind := range testserver.Kinds() {
		if summary.Faults[kind] == 0 {
			t.Errorf("no %s fault in %d requests (IDEM_SEED=%d): the run does not cover it", kind, summary.Requests, seed)
		}
	}
	races, crossed := crossNodeRaces(run.events)
	if crossed == 0 {
		t.Errorf("none of the %d hold races ran its attempts on both nodes (IDEM_SEED=%d)", races, seed)
	}
	t.Logf("event log (%d of %d hold races across the nodes):\n%s", crossed, races, summary)
}

// crossNodeRaces counts the hold races of the events (a held attempt that
// reached a node, and the next attempt of its operation, which reached a
// node while the held one ran) and those whose two attempts went to
// different nodes.
func crossNodeRaces(events []testserver.Event) (races, crossed int) {
	byOp := map[string][]testserver.Event{}
	for _, e := range events {
		if e.Op != "" && e.Upstream != "" {
			byOp[e.Op] = append(byOp[e.Op], e)
		}
	}
	for _, held := range events {
		if held.Fault.Kind != testserver.FaultHold || held.Upstream == "" {
			continue
		}
		var retry *testserver.Event
		for i, e := range byOp[held.Op] {
			if e.Attempt > held.Attempt && (retry == nil || e.Attempt < retry.Attempt) {
				retry = &byOp[held.Op][i]
			}
		}
		if retry == nil || !retry.Time.Before(held.End) {
			continue // no retry came while it was held: no race
		}
		races++
		if retry.Upstream != held.Upstream {
			crossed++
		}
	}
	return races, crossed
}

// TestChaosMixCoversEveryKind keeps the mix in step with testserver: a new
// fault kind must join the suite.
func TestChaosMixCoversEveryKind(t *testing.T) {
	var kinds []testserver.FaultKind
	var total float64
	for _, c := range chaosMix(chaosAttemptTimeout) {
		require.NoError(t, c.Fault.Validate())
		kinds, total = append(kinds, c.Fault.Kind), total+c.P
	}
	for _, kind := range testserver.Kinds() {
		require.True(t, slices.Contains(kinds, kind), "chaosMix has no %s fault", kind)
	}
	require.InDelta(t, 0.15, total, 0.01, "chaosMix: the share of attempts that meet a fault")
	require.NoError(t, testserver.ValidateRules(chaosRules("/v1/payments", chaosAttemptTimeout)))
}
