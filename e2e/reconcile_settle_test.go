//go:build unix

package e2e

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/testserver"
)

// settledAfterKill: a node dies (SIGKILL) after the gateway charged the
// card, before it recorded the charge, and the client never retries.
// Within the lease plus one interval a reconciler takes the charge over
// from "gateway-called", finds the charge at the gateway, records it and
// stores the 201; a retry replays it. One gateway charge, one credit, one
// settlement.
func settledAfterKill(t *testing.T, r *reconcileRun) {
	nodeA, urlA := r.node(t, []string{"IDEM_CRASH_AT=" + api.StepGatewayAnswered}, true)
	nodeB, urlB := r.node(t, nil, true)
	op := operation{key: uuid.NewString(), account: fundedAccount(0), amount: 1234}
	before := r.db.balances(t)[op.account]

	res := postCharge(t, urlA, op)
	killed := time.Now()
	require.Error(t, res.err, "the node dies before it answers: %+v", res)
	waitLogged(t, nodeA, "crash switch: SIGKILL")
	bound := reconcileLease + reconcileEvery
	rec, _ := r.db.awaitRecord(t, op.key, killed.Add(bound+reconcileSlack), settled, nodeA, nodeB)
	t.Logf("settled %v after the kill (lease + interval: %v)", time.Since(killed).Round(time.Millisecond), bound)
	assert.Equal(t, chargeRecord{state: "done", attempt: 2, token: rec.token, point: api.StepGatewayCalled, status: http.StatusCreated}, rec,
		"completed by a reconciler's takeover, from the point before the gateway call")
	assert.Equal(t, 1, len(r.lookups()), "one lookup at the gateway")
	charge := r.requireCreditedOnce(t, op, before)

	v := retry(t, urlB, op)
	require.Equal(t, testserver.OutcomeOK, v.kind, "the retry: %+v", v)
	assert.True(t, v.replayed, "the retry replays the settled charge")
	assert.Equal(t, charge.ID, v.result)
	r.requireCreditedOnce(t, op, before)
	assert.Equal(t, 1, logged(1, func() int { return settlements(op.key, "completed", nodeA, nodeB) }), "settled once")
}

// settledWhilePaused: a node stalls (its crash switch pauses the charge
// after it charged the card and recorded the charge, and then the whole
// process is stopped with SIGSTOP, as a frozen VM would be), and the client
// never retries. The other node's reconciler takes the charge over from
// "recorded" within the lease plus one interval and stores the 201; a
// retry replays it. When the node goes on, its late completion is refused
// (409 key-in-flight). One gateway charge, one credit, one settlement.
func settledWhilePaused(t *testing.T, r *reconcileRun) {
	pause := []string{"IDEM_CRASH_AT=" + api.StepRecorded, "IDEM_CRASH_ACTION=pause"}
	nodeA, urlA := r.node(t, pause, true)
	nodeB, urlB := r.node(t, nil, true)
	op := operation{key: uuid.NewString(), account: fundedAccount(1), amount: 2345}
	before := r.db.balances(t)[op.account]

	first := make(chan reply, 1)
	go func() { first <- postCharge(t, urlA, op) }()
	waitLogged(t, nodeA, "crash switch: paused")
	require.NoError(t, nodeA.signal(syscall.SIGSTOP))
	paused := time.Now()
	bound := reconcileLease + reconcileEvery
	rec, _ := r.db.awaitRecord(t, op.key, paused.Add(bound+reconcileSlack), settled, nodeA, nodeB)
	t.Logf("settled %v after the pause (lease + interval: %v)", time.Since(paused).Round(time.Millisecond), bound)
	assert.Equal(t, chargeRecord{state: "done", attempt: 2, token: rec.token, point: api.StepRecorded, status: http.StatusCreated}, rec)
	assert.Empty(t, r.lookups(), "the point names the charge: no lookup")
	charge := r.requireCreditedOnce(t, op, before)

	v := retry(t, urlB, op)
	require.Equal(t, testserver.OutcomeOK, v.kind, "the retry: %+v", v)
	assert.True(t, v.replayed)
	assert.Equal(t, charge.ID, v.result)

	require.NoError(t, nodeA.signal(syscall.SIGCONT))
	requireLateCompletionRefused(t, nodeA, first)
	r.requireCreditedOnce(t, op, before)
	assert.Equal(t, 1, logged(1, func() int { return settlements(op.key, "completed", nodeA, nodeB) }), "settled once")
}

// freedAfterKill: a node dies at point, before it called the gateway
// (after the claim, with no recovery point; or after it recorded
// "gateway-called"), and the client does not retry. A reconciler finds no
// charge (without asking the gateway when there is no recovery point) and
// frees the record within the lease plus one interval; the next retry
// charges once.
func freedAfterKill(point string) func(*testing.T, *reconcileRun) {
	return func(t *testing.T, r *reconcileRun) {
		crash := []string{"IDEM_CRASH_AT=" + point, "IDEM_CRASH_ROUTE=" + "POST /v1/charges"}
		nodeA, urlA := r.node(t, crash, true)
		nodeB, urlB := r.node(t, nil, true)
		op := operation{key: uuid.NewString(), account: fundedAccount(2), amount: 3456}
		before := r.db.balances(t)[op.account]

		res := postCharge(t, urlA, op)
		killed := time.Now()
		require.Error(t, res.err, "the node dies before it answers: %+v", res)
		waitLogged(t, nodeA, "crash switch: SIGKILL")
		bound := reconcileLease + reconcileEvery
		gone := func(_ chargeRecord, found bool) bool { return !found }
		r.db.awaitRecord(t, op.key, killed.Add(bound+reconcileSlack), gone, nodeA, nodeB)
		t.Logf("freed %v after the kill (lease + interval: %v)", time.Since(killed).Round(time.Millisecond), bound)
		assert.Equal(t, 1, logged(1, func() int { return settlements(op.key, "not-happened", nodeA, nodeB) }), "freed by a reconciler, once")
		wantLookups := map[bool]int{true: 0, false: 1}[point == "claimed"]
		assert.Len(t, r.lookups(), wantLookups, "lookups at the gateway")
		assert.Equal(t, api.GatewayStats{}, r.gateway.Stats(), "nothing charged")

		v := retry(t, urlB, op)
		require.Equal(t, testserver.OutcomeOK, v.kind, "the retry: %+v", v)
		assert.False(t, v.replayed, "the retry runs afresh")
		charge := r.requireCreditedOnce(t, op, before)
		assert.Equal(t, charge.ID, v.result)
	}
}
