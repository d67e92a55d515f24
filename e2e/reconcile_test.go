//go:build unix

package e2e

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/testserver"
)

// The reconciler's runs use short settings, so that each takes seconds:
// the nodes' lease (-lease, a charge attempt's and the reconciler's own)
// and the reconcile interval (-reconcile).
const (
	reconcileLease = time.Second
	reconcileEvery = 500 * time.Millisecond
	// reconcileSlack is what the bound "settled within the lease plus one
	// interval of the node's death" leaves out: the pass's own work (a
	// takeover, a lookup, a credit, the settlement's commit), the poll's
	// period, and the scheduling of a dozen processes on a loaded 2-core
	// machine.
	reconcileSlack = 1500 * time.Millisecond
)

// TestReconciler: card charges (POST /v1/charges, Leased) abandoned by a
// server program that dies or stalls, and whose client never retries, are
// settled by the reconcilers of the nodes (-reconcile); see each
// scenario. Every node is a real process on one database; the card gateway
// runs in the test, behind a testserver, and its count of charges is the
// ground truth of what the card was charged. Two reconcilers over 1,000
// operations, each settled once, is server's
// TestTwoReconcilersSettleEachOperationOnce (real Postgres, both stores).
func TestReconciler(t *testing.T) {
	pgtest.DatabaseURL(t) // skip (or fail under CI) before the build when there is no database
	bin := buildServerProgram(t)
	scenarios := []struct {
		name string
		run  func(*testing.T, *reconcileRun)
	}{
		{"killed after the gateway charged", settledAfterKill},
		{"paused after the charge was recorded", settledWhilePaused},
		{"killed after the claim", freedAfterKill("claimed")},
		{"killed before the gateway was called", freedAfterKill(api.StepGatewayCalled)},
		{"unknown until the maximum age", parkedAtMaxAge},
		{"reconciler killed in mid-settlement", settledAfterReconcilerKilled},
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.run(t, newReconcileRun(t, bin))
		})
	}
}

// reconcileRun is one scenario's world: the server program, a database of
// its own, and the card gateway, in the test process behind a testserver
// (front) whose rules can make its lookups fail.
type reconcileRun struct {
	bin     string
	db      *database
	gateway *api.Gateway
	front   *testserver.Server
}

func newReconcileRun(t *testing.T, bin string) *reconcileRun {
	t.Helper()
	r := &reconcileRun{bin: bin, db: openDatabase(t, pgtest.SchemaURL(t))}
	r.gateway = api.NewGateway(api.GatewayConfig{Logger: slog.New(slog.DiscardHandler)})
	r.front = testserver.New(r.gateway, testserver.Config{})
	t.Cleanup(r.front.Close)
	return r
}

// node starts a supervised server program on the run's database and
// gateway, with the crash switch env, a reconciler when reconcile is set,
// and the extra flags; it returns its supervisor and base URL.
func (r *reconcileRun) node(t *testing.T, env []string, reconcile bool, extra ...string) (*supervisor, string) {
	t.Helper()
	addr := freeAddr(t)
	args := []string{"-addr", addr, "-db", r.db.url, "-gateway", r.front.URL, "-lease", reconcileLease.String()}
	if reconcile {
		args = append(args, "-reconcile", reconcileEvery.String())
	}
	return supervise(t, r.bin, env, append(args, extra...)...), "http://" + addr
}

// lookups returns the gateway lookups (GET /v1/charges/by-key/...) made.
func (r *reconcileRun) lookups() []testserver.Event {
	var out []testserver.Event
	for _, e := range r.front.Events() {
		if e.Method == http.MethodGet && strings.HasPrefix(e.Path, "/v1/charges/by-key/") {
			out = append(out, e)
		}
	}
	return out
}

// requireCreditedOnce checks the ground truth of a charge made once: the
// gateway charged the card once, the database holds one charge under op's
// key, and the account was credited once. It returns the charge.
func (r *reconcileRun) requireCreditedOnce(t *testing.T, op operation, before int64) api.Charge {
	t.Helper()
	assert.Equal(t, api.GatewayStats{Charges: 1, AmountCents: op.amount}, r.gateway.Stats(), "the card charged once")
	charges := r.db.charges(t)
	require.Len(t, charges, 1, "one charge recorded: %+v", charges)
	assert.Equal(t, op.key, charges[0].Key)
	assert.Equal(t, before+op.amount, r.db.balances(t)[op.account], "the account credited once")
	return charges[0]
}

// retry makes op's charge again through the idem client on the node at url,
// as a client that comes back does.
func retry(t *testing.T, url string, op operation) verdict {
	t.Helper()
	p := newPayer(url, clientConfig(2*time.Second), 20*time.Second, 0)
	p.route = chargesRoute
	return p.pay(t.Context(), op)
}

// chargeRecord is the idempotency record of a charge, as the database
// holds it.
type chargeRecord struct {
	state   string // running, done, unavailable or uncertain
	attempt int
	token   string
	point   string // the recovery point, "" for none
	status  int    // the stored status, 0 while running
}

// record reads the record of the charge under key; false when there is
// none.
func (d *database) record(t *testing.T, key string) (chargeRecord, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rec chargeRecord
	err := d.pool.QueryRow(ctx, `
SELECT state, attempt, token::text, coalesce(recovery_point, ''), coalesce(status, 0)
FROM idem_records WHERE tenant = $1 AND route = 'POST /v1/charges' AND idem_key = $2`, tenant, key).
		Scan(&rec.state, &rec.attempt, &rec.token, &rec.point, &rec.status)
	if errors.Is(err, pgx.ErrNoRows) {
		return chargeRecord{}, false
	}
	require.NoError(t, err)
	return rec, true
}

// awaitRecord polls the record of the charge under key until until says
// so, and fails the test when it has not by deadline; the logs of nodes
// go in the failure. It returns the record and whether there is one.
func (d *database) awaitRecord(t *testing.T, key string, deadline time.Time, until func(chargeRecord, bool) bool,
	nodes ...*supervisor) (chargeRecord, bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		rec, found := d.record(t, key)
		if until(rec, found) {
			return rec, found
		}
		if time.Now().After(deadline) {
			var logs []string
			for _, n := range nodes {
				logs = append(logs, n.logTail())
			}
			t.Fatalf("the record of %s is %+v (found %v) at the deadline; logs:\n%s", key, rec, found, strings.Join(logs, "\n---\n"))
		}
		<-tick.C
	}
}

// settled is an awaitRecord condition: the record is no longer running.
func settled(rec chargeRecord, found bool) bool { return found && rec.state != "running" }

// settlements counts the records "idem: reconciled" with the answer for
// key in the logs of nodes: how many times a reconciler stored that
// answer.
func settlements(key, answer string, nodes ...*supervisor) int {
	n := 0
	for _, s := range nodes {
		n += countLines(s.logText(), `msg="idem: reconciled"`, " key="+key+" ", " answer="+answer)
	}
	return n
}

// logged waits until count() reaches want, at most 10 s, and returns its
// last value: a node logs a settlement after it stored it, so its line may
// trail what the database already shows.
func logged(want int, count func() int) int {
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	n := count()
	for n < want && time.Now().Before(deadline) {
		<-tick.C
		n = count()
	}
	return n
}

// countLines counts the lines of text that hold every one of parts.
func countLines(text string, parts ...string) int {
	n := 0
	for line := range strings.Lines(text) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}
