package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/testserver"
)

// outboxChaosMessages is how many notifications TestOutboxChaos sends.
const outboxChaosMessages = 2000

// outboxStall is how long TestOutboxChaos waits for the next
// notification or delivery before it fails: a message's deliveries are
// retried within a second (MaxBackoff, the bursts' Retry-After), each
// bounded by fastOutbox's Timeout.
const outboxStall = 30 * time.Second

// outboxFaults are the faults between the dispatcher and the Receiver:
// after the handler recorded the notification (the response dropped, a
// 502 instead of the 201, the body cut short, the response past the
// attempt's timeout) and before (a reset), about 15% of the attempts; and
// bursts of two 503s with Retry-After for 2% of the messages.
func outboxFaults(seed uint64, n int) []testserver.Rule {
	busy := testserver.Fault{Kind: testserver.FaultStatus, Status: 503, RetryAfter: time.Second}
	var rules []testserver.Rule
	for i := range n {
		if testserver.Draw(seed, "503-burst", notificationKey(i), 0) < 0.02 {
			rules = append(rules, testserver.Rule{Name: "503-burst",
				Match:  testserver.Match{Key: notificationKey(i), Attempt: testserver.Range{Max: 2}},
				Script: []testserver.Fault{busy, busy}})
		}
	}
	f := func(p float64, fault testserver.Fault) testserver.Chance {
		return testserver.Chance{P: p, Fault: fault}
	}
	return append(rules, testserver.Rule{Name: "chaos", Match: testserver.Match{Method: "POST", Path: "/v1/notifications"},
		Mix: []testserver.Chance{
			f(0.03, testserver.Fault{Kind: testserver.FaultDropReset}),
			f(0.02, testserver.Fault{Kind: testserver.FaultDropClose}),
			f(0.02, testserver.Fault{Kind: testserver.FaultStatusAfter, Status: 502}),
			f(0.03, testserver.Fault{Kind: testserver.FaultPartialBody}),
			f(0.02, testserver.Fault{Kind: testserver.FaultDelayResponse, Delay: 2 * outboxAttemptTimeout}),
			f(0.03, testserver.Fault{Kind: testserver.FaultReset}),
		}})
}

// TestOutboxChaos: 2,000 notifications, committed in the outbox, are
// delivered by a dispatcher through every fault of outboxFaults to the
// Receiver. The Receiver's own records show each exactly once, none lost,
// and nothing is parked.
func TestOutboxChaos(t *testing.T) {
	seed := testserver.Seed(t)
	rig := newOutboxRig(t, pgtest.SchemaURL(t), testserver.Config{Seed: seed, Rules: outboxFaults(seed, outboxChaosMessages)}, api.ReceiverConfig{})
	ob, err := outbox.New(rig.pool, fastOutbox(rig.tally))
	require.NoError(t, err)
	ids := rig.enqueue(t, ob, 0, outboxChaosMessages)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()
	rig.waitNotified(t, outboxChaosMessages, outboxStall)
	// The last deliveries' responses may still be on their way.
	waitGrowing(t, "deliveries the dispatcher reported", outboxChaosMessages, outboxStall, func() (int, error) {
		return int(rig.tally.delivered.Load() + rig.tally.parked.Load()), nil
	}, rig.tally.String)
	cancel()
	require.NoError(t, <-done)

	rig.requireExactlyOnce(t, ids)
	require.Zero(t, rig.tally.parked.Load(), "messages parked")
	sum := testserver.Summarize(rig.srv.Events())
	for _, k := range []testserver.FaultKind{testserver.FaultDropReset, testserver.FaultDropClose, testserver.FaultStatusAfter,
		testserver.FaultPartialBody, testserver.FaultDelayResponse, testserver.FaultReset, testserver.FaultStatus} {
		require.NotZero(t, sum.Faults[k], "no %s fault was injected", k)
	}
	require.Greater(t, sum.Requests, outboxChaosMessages)
	t.Logf("%d notifications: %d requests, %d faults, %d River-level retries; seed %d",
		outboxChaosMessages, sum.Requests, sum.Requests-sum.Faults[testserver.FaultNone], rig.tally.retried.Load(), seed)
}
