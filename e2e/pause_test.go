//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// pauseLease is the lease of the paused-node test: the retry on the other
// node waits it out once.
const pauseLease = time.Second

// TestPausedNodeTakenOver: a node stops (SIGSTOP, as a VM freeze or a long
// GC pause would) in the middle of a card charge, after it charged the card
// and recorded the charge, before the middleware stores its response. Its
// lease runs out; the client's retry on the other node takes the charge
// over from the recovery point "recorded", which names the gateway's
// charge, credits nothing again and answers 201. Then the paused node goes
// on (SIGCONT): its completion is refused as stale, and its client gets 409
// key-in-flight, not a second 201. One gateway charge, one credit.
func TestPausedNodeTakenOver(t *testing.T) {
	pgtest.DatabaseURL(t) // skip (or fail under CI) before the build when there is no database
	bin := buildServerProgram(t)
	db := openDatabase(t, pgtest.SchemaURL(t))
	gateway := api.NewGateway(api.GatewayConfig{Logger: slog.New(slog.DiscardHandler)})
	gw := httptest.NewServer(gateway)
	t.Cleanup(gw.Close)
	args := func(addr string) []string {
		return []string{"-addr", addr, "-db", db.url, "-gateway", gw.URL, "-lease", pauseLease.String()}
	}
	addrA, addrB := freeAddr(t), freeAddr(t)
	pause := []string{"IDEM_CRASH_AT=" + api.StepRecorded, "IDEM_CRASH_SIGNAL=STOP"}
	nodeA := supervise(t, bin, pause, args(addrA)...)
	supervise(t, bin, nil, args(addrB)...)

	op := operation{key: uuid.NewString(), account: fundedAccount(0), amount: 1234}
	before := db.balances(t)[op.account]
	first := make(chan reply, 1)
	go func() { first <- postCharge(t, "http://"+addrA, op) }()
	waitStopped(t, nodeA)

	p := newPayer("http://"+addrB, clientConfig(2*time.Second), 20*time.Second, 0)
	p.route = chargesRoute
	v := p.pay(context.Background(), op)
	require.Equal(t, testserver.OutcomeOK, v.kind, "the retry on the other node: %+v; log:\n%s", v, nodeA.logTail())
	assert.False(t, v.replayed, "the other node took the charge over and ran it")

	require.NoError(t, nodeA.signal(syscall.SIGCONT))
	var late reply
	select {
	case late = <-first:
	case <-time.After(time.Minute):
		t.Fatalf("the paused node did not answer within a minute of SIGCONT; log:\n%s", nodeA.logTail())
	}
	require.NoError(t, late.err)
	assert.Equal(t, http.StatusConflict, late.status, "the paused node's answer: %s", late.body)
	assert.Contains(t, late.body, wire.ProblemKeyInFlight)
	assert.Contains(t, nodeA.logText(), "stale completion refused")

	charges := db.charges(t)
	require.Len(t, charges, 1, "one charge recorded: %+v", charges)
	assert.Equal(t, op.key, charges[0].Key)
	assert.Equal(t, api.GatewayStats{Charges: 1, AmountCents: op.amount}, gateway.Stats(), "the card charged once")
	assert.Equal(t, before+op.amount, db.balances(t)[op.account], "the account credited once")
	assert.Equal(t, charges[0].ID, v.result, "the client's 201 names the recorded charge")
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

// waitStopped waits until the supervisor's child is stopped (state T in
// /proc, hence linux only), at most 30 s.
func waitStopped(t *testing.T, s *supervisor) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for {
		state, err := s.state()
		require.NoError(t, err)
		if state == "T" {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("the child did not stop within 30 s (state %s); log:\n%s", state, s.logTail())
		}
	}
}

// state is the child's process state from /proc/<pid>/stat: R, S, T, ...
func (s *supervisor) state() (string, error) {
	s.mu.Lock()
	pid := s.child.Process.Pid
	s.mu.Unlock()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// pid (comm) state ...: comm may hold spaces, so read after its ")".
	rest := string(data[bytes.LastIndexByte(data, ')')+1:])
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", fmt.Errorf("/proc/%d/stat: %q", pid, data)
	}
	return fields[0], nil
}

// signal sends sig to the child.
func (s *supervisor) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.child.Process.Signal(sig)
}
