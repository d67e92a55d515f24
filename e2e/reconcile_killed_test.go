//go:build unix

package e2e

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/testserver"
)

// settledAfterReconcilerKilled: a node dies after the gateway charged the
// card; the only reconciler then running takes the charge over, finds it
// at the gateway and records it (the credit), and dies (SIGKILL, its crash
// switch "reconciled") before it stores the settlement. Once its lease
// ends, another reconciler (a second node, or the first one restarted)
// takes the charge over with a higher attempt number and a new fencing
// token, finds the charge recorded, and settles it: one settlement, one
// credit, one gateway charge, and a retry replays it.
func settledAfterReconcilerKilled(t *testing.T, r *reconcileRun) {
	nodeA, urlA := r.node(t, []string{"IDEM_CRASH_AT=" + api.StepGatewayAnswered}, false)
	dying, _ := r.node(t, []string{"IDEM_CRASH_AT=reconciled"}, true)
	op := operation{key: uuid.NewString(), account: fundedAccount(4), amount: 5678}
	before := r.db.balances(t)[op.account]

	res := postCharge(t, urlA, op)
	require.Error(t, res.err, "the node dies before it answers: %+v", res)
	waitLogged(t, nodeA, "crash switch: SIGKILL")
	waitLogged(t, dying, "crash switch: SIGKILL")
	killedAt := time.Now()
	dead, found := r.db.record(t, op.key)
	require.True(t, found)
	require.Equal(t, "running", dead.state, "the dead reconciler stored nothing: %+v", dead)
	deadAttempt := takeoverAttempt(t, dying.logText())
	assert.Equal(t, 2, deadAttempt, "the dead reconciler took the node's attempt 1 over")
	require.Len(t, r.db.charges(t), 1, "it recorded the charge before it died")

	other, urlB := r.node(t, nil, true) // joins the restarted one
	bound := reconcileLease + reconcileEvery
	rec, _ := r.db.awaitRecord(t, op.key, killedAt.Add(bound+reconcileSlack), settled, dying, other)
	t.Logf("settled %v after the reconciler's death (lease + interval: %v)", time.Since(killedAt).Round(time.Millisecond), bound)
	assert.Equal(t, "done", rec.state)
	assert.Equal(t, http.StatusCreated, rec.status)
	assert.Greater(t, rec.attempt, deadAttempt, "a higher fencing token than the dead reconciler's")
	assert.NotEqual(t, dead.token, rec.token)
	assert.Equal(t, 1, logged(1, func() int { return settlements(op.key, "completed", nodeA, dying, other) }), "settled once")
	charge := r.requireCreditedOnce(t, op, before)

	v := retry(t, urlB, op)
	require.Equal(t, testserver.OutcomeOK, v.kind, "the retry: %+v", v)
	assert.True(t, v.replayed)
	assert.Equal(t, charge.ID, v.result)
	exits := dying.exited()
	require.NotEmpty(t, exits)
	assert.True(t, killedBySIGKILL(exits[0]), "the reconciler ended %v, want SIGKILL", exits[0])
}

// takeoverRE finds the attempt of a reconciler's takeover in a node's log.
var takeoverRE = regexp.MustCompile(`msg="idem: reconciler took over an abandoned operation".* attempt=(\d+)`)

// takeoverAttempt returns the attempt number of the first takeover in
// log, which must hold one.
func takeoverAttempt(t *testing.T, log string) int {
	t.Helper()
	m := takeoverRE.FindStringSubmatch(log)
	require.NotNil(t, m, "no takeover in the log:\n%s", log)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}
