package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

var reconcileAreas = []area{
	{"TakeAbandonedTakesOverAsARetryWould", onlyLeased, testTakeAbandoned},
	{"TakeAbandonedLeavesLiveLeasesAndOtherRoutes", onlyLeased, testTakeLeavesLive},
	{"SettlementsAreFenced", onlyLeased, testSettlementsAreFenced},
	{"PostponedOperationsAreDueAfterTheirWait", onlyLeased, testPostpone},
	{"TwoTakersTakeDisjointOperations", onlyLeased, testTwoTakers},
}

func (e *env) take(s server.Store, routes []string, lease time.Duration, limit int) []*server.Taken {
	e.t.Helper()
	ts, err := s.TakeAbandoned(context.Background(), routes, lease, limit)
	require.NoError(e.t, err)
	return ts
}

var charges = []string{chargesRoute}

// A reconciler takes an abandoned operation over as a retry would: the
// next attempt number, the recovery point, the stored request and the
// operation's age, under a lease that a retry meanwhile meets as in
// flight; its Complete is what later claims replay.
func testTakeAbandoned(t *testing.T, e *env, _ mode) {
	ctx := context.Background()
	e.abandon("k-", 1)
	e.clock.Advance(5 * time.Second)
	ts := e.take(e.store, charges, 20*time.Second, 16)
	require.Len(t, ts, 1)
	tk := ts[0]
	assert.Equal(t, server.Operation{Tenant: "acme", Principal: "alice", Route: chargesRoute, Key: "k-0", Attempt: 2}, tk.Operation)
	assert.Equal(t, "charged", tk.Recovery.Point)
	assert.JSONEq(t, `{"charge":"ch_1"}`, string(tk.Recovery.Data))
	assert.Equal(t, "request of k-0", string(tk.Request))
	assert.InDelta(t, 5*time.Second, tk.Age, float64(time.Second), "the age by the store's clock")
	busy := e.claim(leasedClaim("k-0", 30*time.Second, time.Hour, 1))
	require.Equal(t, server.VerdictInFlight, busy.Verdict, "a retry while the reconciler holds the lease")
	assert.InDelta(t, 20*time.Second, busy.RetryAfter, float64(2*time.Second))
	assert.Empty(t, e.take(e.store, charges, 20*time.Second, 16), "a taken operation is not taken again")

	require.NoError(t, tk.Settler.Complete(ctx, created(`{"by":"reconciler"}`)))
	res := e.claim(leasedClaim("k-0", 30*time.Second, time.Hour, 1))
	require.Equal(t, server.VerdictReplay, res.Verdict)
	assert.Equal(t, `{"by":"reconciler"}`, string(res.Response.Body))
	e.clock.Advance(time.Hour / 2)
	assert.Empty(t, e.take(e.store, charges, 20*time.Second, 16), "a completed operation is never taken")

	e.abandon("gone-", 1)
	tk = e.take(e.store, charges, 20*time.Second, 16)[0]
	require.NoError(t, tk.Settler.Free(ctx))
	fresh := e.claimed(leasedClaim("gone-0", 30*time.Second, time.Hour, 2))
	assert.Equal(t, 1, fresh.Number(), "a freed operation runs afresh, with any digest")

	e.abandon("parked-", 1)
	tk = e.take(e.store, charges, 20*time.Second, 16)[0]
	require.NoError(t, tk.Settler.Complete(ctx, &server.Response{Unavailable: true}))
	assert.Equal(t, server.VerdictUnavailable, e.claim(leasedClaim("parked-0", 30*time.Second, time.Hour, 1)).Verdict)
}

// A live lease, a completed operation, an operation of another route and
// one past its retention are never taken; the oldest lease goes first.
func testTakeLeavesLive(t *testing.T, e *env, _ mode) {
	ctx := context.Background()
	e.claimed(leasedClaim("k-live", 30*time.Second, time.Hour, 1))
	done := e.claimed(leasedClaim("k-done", 30*time.Second, time.Hour, 1))
	require.NoError(t, done.Complete(ctx, created(`{}`)))
	e.abandon("k-old-", 1)
	e.clock.Advance(time.Second)
	e.abandon("k-new-", 1)
	assert.Empty(t, e.take(e.store, []string{"POST /v1/refunds"}, 20*time.Second, 16), "another route's abandoned operations")
	first := e.take(e.store, charges, 20*time.Second, 1)
	require.Len(t, first, 1)
	assert.Equal(t, "k-old-0", first[0].Key, "the oldest lease first")
	second := e.take(e.store, charges, 20*time.Second, 16)
	require.Len(t, second, 1, "the live lease is never taken")
	assert.Equal(t, "k-new-0", second[0].Key)

	e.abandon("k-expired-", 1)
	e.clock.Advance(2 * time.Hour) // past the retention of every record
	for _, tk := range e.take(e.store, charges, 20*time.Second, 16) {
		t.Errorf("took %s past its retention", tk.Key)
	}
}

// A reconciler's settlements are fenced by its token: once a retry, or
// another reconciler after its lease, has taken the operation over, they
// change nothing.
func testSettlementsAreFenced(t *testing.T, e *env, _ mode) {
	ctx := context.Background()
	e.abandon("k-", 1)
	dead := e.take(e.store, charges, 20*time.Second, 16)
	require.Len(t, dead, 1)
	e.clock.Advance(21 * time.Second)
	alive := e.take(e.store, charges, 20*time.Second, 16)
	require.Len(t, alive, 1, "taken again once the first reconciler's lease ended")
	assert.Equal(t, 3, alive[0].Attempt, "a higher attempt number than the dead reconciler's")
	for name, err := range map[string]error{
		"Complete": dead[0].Settler.Complete(ctx, created(`{"by":"dead"}`)),
		"Free":     dead[0].Settler.Free(ctx),
		"Postpone": dead[0].Settler.Postpone(ctx, 0),
	} {
		assert.ErrorIs(t, err, server.ErrLeaseLost, "the stale reconciler's %s", name)
	}
	e.clock.Advance(21 * time.Second)
	retry := e.claimed(leasedClaim("k-0", 30*time.Second, time.Hour, 1))
	assert.Equal(t, 4, retry.Number(), "a retry takes over from the reconciler whose lease ended")
	assert.ErrorIs(t, alive[0].Settler.Complete(ctx, created(`{"by":"alive"}`)), server.ErrLeaseLost)
	require.NoError(t, retry.Complete(ctx, created(`{"by":"retry"}`)))
	res := e.claim(leasedClaim("k-0", 30*time.Second, time.Hour, 1))
	require.Equal(t, server.VerdictReplay, res.Verdict)
	assert.Equal(t, `{"by":"retry"}`, string(res.Response.Body))
}

// Postpone ends the reconciler's lease at once (a retry takes over) and
// makes the operation due again only after its wait.
func testPostpone(t *testing.T, e *env, _ mode) {
	ctx := context.Background()
	e.abandon("k-", 2)
	ts := e.take(e.store, charges, 20*time.Second, 16)
	require.Len(t, ts, 2)
	for _, tk := range ts {
		require.NoError(t, tk.Settler.Postpone(ctx, time.Minute))
	}
	e.clock.Advance(59 * time.Second)
	assert.Empty(t, e.take(e.store, charges, 20*time.Second, 16), "not due before its wait")
	e.clock.Advance(2 * time.Second)
	assert.Len(t, e.take(e.store, charges, 20*time.Second, 16), 2, "due after it")
	e.clock.Advance(21 * time.Second)
	retry := e.claimed(leasedClaim("k-1", 30*time.Second, time.Hour, 1))
	assert.Equal(t, 4, retry.Number(), "a retry between passes takes over as usual")
	rec, _ := retry.Recovery()
	assert.Equal(t, "charged", rec.Point)
}

// Two reconcilers (two nodes) taking at once take each operation once.
func testTwoTakers(t *testing.T, e *env, _ mode) {
	const n = 200
	e.abandon("k-", n)
	stores := []server.Store{e.store, e.node()}
	var mu sync.Mutex
	taken := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Go(func() {
			for {
				ts, err := s.TakeAbandoned(context.Background(), charges, time.Minute, 7)
				if !assert.NoError(t, err) || len(ts) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range ts {
					taken[tk.Key]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Len(t, taken, n, "every abandoned operation taken")
	for key, c := range taken {
		if c != 1 {
			t.Errorf("%s taken %d times, want 1", key, c)
		}
	}
}
