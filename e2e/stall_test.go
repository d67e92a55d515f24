//go:build unix

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/testserver"
)

// stallLease is the lease of the stalled-attempt test: the retry on the
// other node waits it out once.
const stallLease = time.Second

// TestStalledAttemptTakenOver: a node's attempt of a card charge stalls
// (the crash switch pauses it, as a long GC pause or a slow disk would)
// after it charged the card and recorded the charge, before the middleware
// stores its response. Its lease runs out; the client's retry on the other
// node takes the charge over from the recovery point "recorded", which
// names the gateway's charge, credits nothing again and answers 201. Then
// the stalled attempt goes on (SIGUSR1): its completion is refused as
// stale, and its client gets 409 key-in-flight, not a second 201. One
// gateway charge, one credit.
func TestStalledAttemptTakenOver(t *testing.T) {
	pgtest.DatabaseURL(t) // skip (or fail under CI) before the build when there is no database
	bin := buildServerProgram(t)
	db := openDatabase(t, pgtest.SchemaURL(t))
	gateway := api.NewGateway(api.GatewayConfig{Logger: slog.New(slog.DiscardHandler)})
	gw := httptest.NewServer(gateway)
	t.Cleanup(gw.Close)
	args := func(addr string) []string {
		return []string{"-addr", addr, "-db", db.url, "-gateway", gw.URL, "-lease", stallLease.String()}
	}
	addrA, addrB := freeAddr(t), freeAddr(t)
	pause := []string{"IDEM_CRASH_AT=" + api.StepRecorded, "IDEM_CRASH_ACTION=pause"}
	nodeA := supervise(t, bin, pause, args(addrA)...)
	supervise(t, bin, nil, args(addrB)...)

	op := operation{key: uuid.NewString(), account: fundedAccount(0), amount: 1234}
	before := db.balances(t)[op.account]
	first := make(chan reply, 1)
	go func() { first <- postCharge(t, "http://"+addrA, op) }()
	waitLogged(t, nodeA, "crash switch: paused")

	p := newPayer("http://"+addrB, clientConfig(2*time.Second), 20*time.Second, 0)
	p.route = chargesRoute
	v := p.pay(context.Background(), op)
	require.Equal(t, testserver.OutcomeOK, v.kind, "the retry on the other node: %+v; log:\n%s", v, nodeA.logTail())
	assert.False(t, v.replayed, "the other node took the charge over and ran it")

	requireLateCompletionRefused(t, nodeA, first)

	charges := db.charges(t)
	require.Len(t, charges, 1, "one charge recorded: %+v", charges)
	assert.Equal(t, op.key, charges[0].Key)
	assert.Equal(t, api.GatewayStats{Charges: 1, AmountCents: op.amount}, gateway.Stats(), "the card charged once")
	assert.Equal(t, before+op.amount, db.balances(t)[op.account], "the account credited once")
	assert.Equal(t, charges[0].ID, v.result, "the client's 201 names the recorded charge")
}

// requireLateCompletionRefused lets node's paused attempt go on (SIGUSR1)
// and requires that its completion, which first receives, be fenced off:
// 409 key-in-flight, and "stale completion refused" in node's log.
func requireLateCompletionRefused(t *testing.T, node *supervisor, first <-chan reply) {
	t.Helper()
	require.NoError(t, node.signal(syscall.SIGUSR1))
	var late reply
	select {
	case late = <-first:
	case <-time.After(time.Minute):
		t.Fatalf("the paused attempt did not answer within a minute of SIGUSR1; log:\n%s", node.logTail())
	}
	require.NoError(t, late.err)
	assert.Equal(t, http.StatusConflict, late.status, "the late completion is fenced off: %s", late.body)
	assert.Contains(t, late.body, wire.ProblemKeyInFlight)
	assert.Contains(t, node.logText(), "stale completion refused")
}

// reply is a response to one plain request, or why there was none.
type reply struct {
	status int
	body   string
	err    error
}

// postCharge sends op's charge to url once, with a plain client.
func postCharge(t *testing.T, url string, op operation) reply {
	body, err := json.Marshal(chargesRoute.body(op))
	if err != nil {
		return reply{err: err}
	}
	req, err := http.NewRequest(http.MethodPost, url+chargesRoute.path, bytes.NewReader(body))
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Authorization", token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.HeaderKey, op.key)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: string(data), err: err}
}

// waitLogged waits until the children's log holds text, at most 30 s.
func waitLogged(t *testing.T, s *supervisor, text string) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for !strings.Contains(s.logText(), text) {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("the log did not say %q within 30 s; log:\n%s", text, s.logTail())
		}
	}
}

// signal sends sig to the child.
func (s *supervisor) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.child.Process.Signal(sig)
}
