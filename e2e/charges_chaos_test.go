package e2e

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/testserver"
)

// The charges chaos run: chargeOps charges (500 by default; 2,000 take
// about 20 s under -race on two cores; -e2e.charges for a soak run). The
// nodes call the gateway with a plain client that makes one attempt of at
// most gatewayTimeout, so that every fault of the gateway leg fails the
// node's attempt (502, the lease ends) and the client's retry takes the
// operation over. Leases are chargeLease long: a 409 key-in-flight makes
// the client wait no longer than the lease left, and a lease outlives the
// gateway call by far.
const (
	gatewayTimeout = 500 * time.Millisecond
	chargeLease    = 2 * time.Second
)

// chargesRoute makes an operation a card charge that credits its account:
// POST /v1/charges.
var chargesRoute = route{
	path:    "/v1/charges",
	idField: "charge_id",
	body: func(op operation) map[string]any {
		return map[string]any{"account_id": op.account, "amount_cents": op.amount, "currency": "EUR"}
	},
}

// The shares of the charges that the gateway declines (402, stored and
// replayed) and that name an account that does not exist (400, a
// rejection: nothing stored, the gateway never called).
const declineShare, missingChargeShare = 0.03, 0.02

// chargeWorkload returns the n charges of a seed: credits of the funded
// accounts (201), charges above the gateway's decline limit (402), and
// charges for the missing account (400). Like workload, everything is
// drawn from (seed, key).
func chargeWorkload(seed uint64, n int) []operation {
	ops := make([]operation, n)
	for i := range ops {
		key := fmt.Sprintf("e2e-charge-%016x-%07d", seed, i)
		u := testserver.Draw(seed, "account", key, 0)
		op := operation{key: key, account: fundedAccount(int(u * 1e6)), want: 201}
		op.amount = 1 + int64(testserver.Draw(seed, "amount", key, 0)*maxAmount)
		switch {
		case u < declineShare:
			op.amount, op.want = api.DefaultDeclineOverCents+op.amount, 402
		case u < declineShare+missingChargeShare:
			op.account, op.want = missingAccount, 400
		}
		ops[i] = op
	}
	return ops
}

// chargesRun is one run of the charges chaos suite and what it left.
type chargesRun struct {
	seed           uint64
	ops            []operation
	verdicts       []verdict
	db             *database
	gateway        *api.Gateway
	leases         *leaseLog
	events, gwLegs []testserver.Event // the client's attempts, the nodes' gateway calls
}

// runChargesChaos makes n charges of the seed's charge workload with the
// idem client through the fault proxy over two nodes on a fresh schema,
// the nodes calling the gateway through a second fault proxy. It returns
// when everything has settled: the front proxy, the nodes, the gateway
// proxy and the gateway, closed in that order (each waits for the
// requests it still serves, which may call the next).
func runChargesChaos(t *testing.T, seed uint64, n int) chargesRun {
	t.Helper()
	traceRun(t)
	run := chargesRun{
		seed: seed, ops: chargeWorkload(seed, n), db: openDatabase(t, pgtest.SchemaURL(t)),
		gateway: api.NewGateway(api.GatewayConfig{Logger: slog.New(slog.DiscardHandler)}),
		leases:  newLeaseLog(),
	}
	gw := httptest.NewServer(run.gateway)
	t.Cleanup(gw.Close)
	gwProxy, err := testserver.NewProxy([]string{gw.URL}, testserver.Config{
		Seed: seed, Rules: chaosRules("/v1/charges", gatewayTimeout), HoldTimeout: 2 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(gwProxy.Close)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	ns := startNodes(t, run.db.url, 2, api.Config{
		GatewayURL:    gwProxy.URL,
		GatewayClient: &http.Client{Transport: transport, Timeout: gatewayTimeout},
		Lease:         chargeLease,
		Hooks:         run.leases.hooks(),
		OnStep:        run.leases.onStep,
	})
	front := balancer(t, ns, testserver.Config{Seed: seed, Rules: chaosRules("/v1/charges", chaosAttemptTimeout), HoldTimeout: 2 * time.Second})
	p := newPayer(front.URL, clientConfig(chaosAttemptTimeout), chaosDeadline, chaosResendFor)
	p.route = chargesRoute

	watch := watchProgress(chaosStall)
	run.verdicts = runLoad(watch.ctx, p, run.ops, chaosWorkers, watch.onDone)
	watch.close()
	if err := watch.err(run.ops, run.verdicts, p.attempts, "client leg:\n"+testserver.Summarize(front.Events()).String()+
		"\ngateway leg:\n"+testserver.Summarize(gwProxy.Events()).String()+"\nleases: "+run.leases.String()); err != nil {
		t.Fatalf("charges (IDEM_SEED=%d): %v", seed, err)
	}
	front.Close()
	ns.close()
	gwProxy.Close()
	gw.Close()
	run.events, run.gwLegs = front.Events(), gwProxy.Events()
	return run
}

// TestChaosCharges: POST /v1/charges, a Leased route whose effect leaves
// the database (a card charge at the gateway), through the chaos mix on
// the client's leg and on the nodes' gateway leg. A failed gateway call
// ends the node's lease with a 502, and the retry takes the operation over
// with its recovery point and asks the gateway again with the same
// downstream key. From the database and the gateway, never the client:
// each operation credited at most once, each ok a charge recorded, each
// definite failure none, the gateway charged exactly what the database
// recorded, the balances add up, and nearly every charge ends as designed.
func TestChaosCharges(t *testing.T) {
	seed := testserver.Seed(t)
	run := runChargesChaos(t, seed, chargeOps(t))
	client, gateway := testserver.Summarize(run.events), testserver.Summarize(run.gwLegs)
	detail := "client leg:\n" + client.String() + "\ngateway leg:\n" + gateway.String() + "\nleases: " + run.leases.String()
	requireChargedOnce(t, run, detail)
	requireDesigned(t, run.ops, run.verdicts, len(run.ops)/100)
	if run.leases.recoveredAt(api.StepGatewayCalled) == 0 {
		t.Errorf("no attempt took over from the recovery point %q (IDEM_SEED=%d): the run does not test the takeover\n%s",
			api.StepGatewayCalled, seed, detail)
	}
	t.Logf("IDEM_SEED=%d\n%s", seed, detail)
}

// requireChargedOnce reads the ground truth from the database and the
// gateway and fails the test, with the seed and detail, when an operation
// was credited more than once, an ok has no charge (or another's), a
// definite failure was credited, a charge belongs to no operation or
// differs from its operation, the balances are not the initial ones plus
// the charges, or the gateway's charges are not the database's.
func requireChargedOnce(t *testing.T, run chargesRun, detail string) {
	t.Helper()
	charges := run.db.charges(t)
	var ledger testserver.Ledger
	for _, c := range charges {
		ledger.Record(c.Key, c.ID)
	}
	report := testserver.Check(&ledger, history(run.ops, run.verdicts))
	if err := report.Err(); err != nil {
		t.Fatalf("exactly-once violated (IDEM_SEED=%d):\n%s\n%s\n%v", run.seed, report, detail, err)
	}
	byKey := make(map[string]operation, len(run.ops))
	for _, op := range run.ops {
		byKey[op.key] = op
	}
	want, total := initialBalances(), int64(0)
	for _, c := range charges {
		want[c.AccountID] += c.AmountCents
		total += c.AmountCents
		if op := byKey[c.Key]; op.account != c.AccountID || op.amount != c.AmountCents {
			t.Errorf("charge %s of %s: %d to %s, want %d to %s (IDEM_SEED=%d)", c.ID, c.Key, c.AmountCents, c.AccountID, op.amount, op.account, run.seed)
		}
	}
	require.Equal(t, want, run.db.balances(t), "account balances, want the initial balances plus the charges (IDEM_SEED=%d)", run.seed)
	require.Equal(t, api.GatewayStats{Charges: len(charges), AmountCents: total}, run.gateway.Stats(),
		"the gateway's charges, want the database's (IDEM_SEED=%d)\n%s", run.seed, detail)
	t.Logf("checker (IDEM_SEED=%d):\n%s", run.seed, report)
}

func TestChargeWorkloadIsTheSeeds(t *testing.T) {
	a := chargeWorkload(42, 500)
	require.Equal(t, fmt.Sprint(a), fmt.Sprint(chargeWorkload(42, 500)), "chargeWorkload(42, 500) differs between two calls")
	wants := map[int]int{}
	for _, op := range a {
		wants[op.want]++
		if declined := op.amount > api.DefaultDeclineOverCents; declined != (op.want == 402) {
			t.Errorf("%s: amount %d, want %d (the gateway declines above %d)", op.key, op.amount, op.want, int64(api.DefaultDeclineOverCents))
		}
	}
	for _, status := range []int{201, 402, 400} {
		if wants[status] == 0 {
			t.Errorf("chargeWorkload(42, 500) has no operation that ends in %d", status)
		}
	}
}
