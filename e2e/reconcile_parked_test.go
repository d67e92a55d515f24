//go:build unix

package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/testserver"
)

// reconcileMaxAge is the nodes' -reconcile-max-age in parkedAtMaxAge: long
// enough for lookups before it (the first comes after the lease), short
// enough for a test.
const reconcileMaxAge = 2 * time.Second

// parkedAtMaxAge: a node dies after the gateway charged the card, and the
// gateway's lookups answer 503 (the provider cannot tell) until the
// operation's maximum age. The reconcilers back off meanwhile, then leave
// it uncertain: a retry gets 409 outcome-uncertain (no Retry-After), and
// never a second charge, even once the provider answers again, until an
// operator resolves it.
func parkedAtMaxAge(t *testing.T, r *reconcileRun) {
	down := testserver.Always(testserver.Match{Method: http.MethodGet, Path: "/v1/charges/by-key/*"},
		testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
	require.NoError(t, r.front.SetRules([]testserver.Rule{down}))
	maxAge := []string{"-reconcile-max-age", reconcileMaxAge.String()}
	nodeA, urlA := r.node(t, []string{"IDEM_CRASH_AT=" + api.StepGatewayAnswered}, true, maxAge...)
	nodeB, urlB := r.node(t, nil, true, maxAge...)
	op := operation{key: uuid.NewString(), account: fundedAccount(3), amount: 4567}
	before := r.db.balances(t)[op.account]

	res := postCharge(t, urlA, op)
	start := time.Now() // the claim was a moment before
	require.Error(t, res.err, "the node dies before it answers: %+v", res)
	// The last look before the maximum age may be followed by a backoff of
	// up to 4 intervals before the look that parks it.
	rec, _ := r.db.awaitRecord(t, op.key, start.Add(reconcileMaxAge+4*reconcileEvery+reconcileLease+reconcileSlack),
		settled, nodeA, nodeB)
	t.Logf("parked %v after the claim (maximum age %v)", time.Since(start).Round(time.Millisecond), reconcileMaxAge)
	assert.Equal(t, "uncertain", rec.state, "left uncertain for an operator: %+v", rec)
	unknown := settlements(op.key, "not-known", nodeA, nodeB)
	assert.NotZero(t, unknown, "looked at and found unknown before the maximum age")
	assert.Zero(t, settlements(op.key, "completed", nodeA, nodeB)+settlements(op.key, "not-happened", nodeA, nodeB))
	parked := logged(1, func() int {
		return countLines(nodeA.logText()+nodeB.logText(), "still not known at its maximum age", " key="+op.key+" ")
	})
	assert.Equal(t, 1, parked, "parked once")
	lookups := r.lookups()
	require.NotEmpty(t, lookups)
	for _, e := range lookups {
		assert.Equal(t, testserver.FaultStatus, e.Fault.Kind, "every lookup answered 503")
	}
	t.Logf("%d lookups, %d answers not-known, then parked", len(lookups), unknown)

	for _, rules := range [][]testserver.Rule{{down}, nil} { // the provider still down, then back
		require.NoError(t, r.front.SetRules(rules))
		late := postCharge(t, urlB, op)
		require.NoError(t, late.err)
		assert.Equal(t, http.StatusConflict, late.status, late.body)
		assert.Contains(t, late.body, wire.ProblemOutcomeUncertain)
	}
	assert.Equal(t, api.GatewayStats{Charges: 1, AmountCents: op.amount}, r.gateway.Stats(), "never a second charge")
	assert.Empty(t, r.db.charges(t), "nothing credited: an operator resolves it")
	assert.Equal(t, before, r.db.balances(t)[op.account])
}
