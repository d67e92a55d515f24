package storetest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

var sweepAreas = []area{
	{"SweepDeletesExpiredInBatches", bothModes, testSweepDeletesExpired},
	{"SweepSkipsRecordsInUse", onlyTransactional, testSweepSkipsRecordsInUse},
	{"ConcurrentSweepsKeepLiveRecords", bothModes, testConcurrentSweeps},
	{"StatsCountsOperationsInFlight", bothModes, testStats},
}

// claimIn is the store-level claim of key in mode m.
func claimIn(m mode, key string, retention time.Duration) *server.Claim {
	c := leasedClaim(key, 30*time.Second, retention, 1)
	c.Mode = m.mode
	if m == transactional {
		c.Request = nil
	}
	return c
}

// record stores a completed record of key in mode m.
func (e *env) record(m mode, key string, retention time.Duration) {
	e.t.Helper()
	res := e.claim(claimIn(m, key, retention))
	require.Equal(e.t, server.VerdictClaimed, res.Verdict, "Claim %s", key)
	require.NoError(e.t, res.Attempt.Complete(context.Background(), created(`{"key":"`+key+`"}`)))
}

// records stores n completed records, keys prefix0 ...
func (e *env) records(m mode, prefix string, n int, retention time.Duration) {
	e.t.Helper()
	for i := range n {
		e.record(m, fmt.Sprintf("%s%d", prefix, i), retention)
	}
}

// answers reports whether key's record still answers claims (a replay, or
// in flight for a live lease); a claim that wins instead is aborted, as a
// refused request's would be.
func (e *env) answers(m mode, key string) bool {
	e.t.Helper()
	res := e.claim(claimIn(m, key, time.Hour))
	if res.Verdict == server.VerdictClaimed {
		require.NoError(e.t, res.Attempt.Abort(context.Background(), true))
		return false
	}
	return true
}

// sweep calls Sweep(limit) and checks its count, unless the store's
// records expire by themselves.
func (e *env) sweep(s server.Store, limit, want int, msg string) {
	e.t.Helper()
	n, err := s.Sweep(context.Background(), limit)
	require.NoError(e.t, err, msg)
	if !e.h.SelfExpiring {
		assert.Equal(e.t, want, n, msg)
	}
}

func testSweepDeletesExpired(t *testing.T, e *env, m mode) {
	e.records(m, "live", 5, 48*time.Hour)
	e.records(m, "old", 25, time.Hour)
	e.clock.Advance(2 * time.Hour)
	for i, want := range []int{10, 10, 5, 0} {
		e.sweep(e.store, 10, want, fmt.Sprintf("batch %d", i))
	}
	for i := range 5 {
		assert.True(t, e.answers(m, fmt.Sprintf("live%d", i)), "a live record stays")
	}
	for i := range 25 {
		assert.False(t, e.answers(m, fmt.Sprintf("old%d", i)), "an expired record is gone")
	}
	deleted := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.records(m, "again", 3, time.Hour)
	e.clock.Advance(2 * time.Hour)
	done := make(chan error, 1)
	go func() {
		done <- server.RunSweeper(ctx, e.store, server.SweepConfig{Interval: time.Hour, Batch: 2, Logger: config(m, server.Config{}).Logger,
			OnSweep: func(n int, err error) { assert.NoError(t, err); deleted <- n }})
	}()
	n := recv(t, deleted)
	if !e.h.SelfExpiring {
		assert.Equal(t, 3, n, "RunSweeper's first sweep runs at once, batch after batch")
	}
	cancel()
	assert.ErrorIs(t, recv(t, done), context.Canceled)
}

// A sweep never deletes, nor waits for, the record of a request that is
// running, past its retention: a new claim, or the reclaim of an expired
// record.
func testSweepSkipsRecordsInUse(t *testing.T, e *env, m mode) {
	e.sweepWhileRunning(m, "k-busy-new")
	e.clock.Advance(2 * time.Hour)
	_, err := e.store.Sweep(context.Background(), 100) // the first request's record
	require.NoError(t, err)
	mux, _ := e.payServer(m, server.Config{Retention: time.Hour})
	require.Equal(t, http.StatusCreated, post(t, serve(t, mux), "/v1/payments", "k-busy-reclaimed", `{"amount": 1}`).status)
	e.clock.Advance(2 * time.Hour)
	e.sweepWhileRunning(m, "k-busy-reclaimed")
}

// sweepWhileRunning sweeps, past its retention, the record of a request
// of key that still runs, and lets the request complete.
func (e *env) sweepWhileRunning(m mode, key string) {
	t := e.t
	g := newGate(e)
	mux := http.NewServeMux()
	e.mount(mux, "POST /v1/payments", m, server.Config{Retention: time.Hour}, g)
	srv := serve(t, mux)
	first := make(chan reply)
	go func() { first <- post(t, srv, "/v1/payments", key, `{"amount": 1}`) }()
	recv(t, g.entered)
	e.clock.Advance(2 * time.Hour) // past the retention of the running claim too
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n, err := e.store.Sweep(ctx, 100) // must not wait for the request
	cancel()
	require.NoError(t, err, key)
	assert.Zero(t, n, "%s: a record a request holds is never swept", key)
	close(g.release)
	r := recv(t, first)
	assert.Equal(t, http.StatusCreated, r.status, "%s: and the request still completes", key)
	assert.False(t, r.replayed(), key)
}

// Two nodes sweep one store at once, round after round as the clock moves
// an hour at a time: in every round exactly the records whose retention
// ended go, each deleted once; a record inside its retention, and one
// whose lease is live past its expiry, stay.
func testConcurrentSweeps(t *testing.T, e *env, m mode) {
	const rounds, perRound = 3, 8
	e.records(m, "live", 3, 48*time.Hour)
	for g := range rounds {
		e.records(m, fmt.Sprintf("g%d-", g), perRound, time.Duration(g+1)*time.Hour)
	}
	held := 0
	if m == leased {
		for i := range 2 { // running past its retention, its lease live
			e.claimed(leasedClaim(fmt.Sprintf("held%d", i), 100*time.Hour, time.Hour, 1))
			held++
		}
	}
	a, b := e.store, e.node()
	for round := 1; round <= rounds; round++ {
		e.clock.Advance(time.Hour + time.Minute)
		deleted := sweepTogether(t, a, b)
		if !e.h.SelfExpiring {
			assert.Equal(t, perRound, deleted, "round %d: records deleted by both nodes", round)
		}
		for g := range rounds {
			for i := range perRound {
				want := g >= round
				assert.Equal(t, want, e.answers(m, fmt.Sprintf("g%d-%d", g, i)), "round %d: record g%d-%d answers", round, g, i)
			}
		}
		for i := range 3 {
			assert.True(t, e.answers(m, fmt.Sprintf("live%d", i)), "round %d: live%d answers", round, i)
		}
		for i := range held {
			assert.True(t, e.answers(m, fmt.Sprintf("held%d", i)), "round %d: held%d's live lease answers", round, i)
		}
	}
}

// sweepTogether runs Sweep(2) loops on a and b at once until each finds
// nothing, and returns how many records they deleted together.
func sweepTogether(t *testing.T, a, b server.Store) int {
	t.Helper()
	var total atomic.Int64
	var wg sync.WaitGroup
	for _, s := range []server.Store{a, b} {
		wg.Go(func() {
			for {
				n, err := s.Sweep(context.Background(), 2)
				if !assert.NoError(t, err) || n == 0 {
					return
				}
				total.Add(int64(n))
			}
		})
	}
	wg.Wait()
	return int(total.Load())
}

// Stats counts the operations in flight and the age of the oldest, by the
// store's clock; completed operations are not counted. A Transactional
// claim is counted only where other sessions can see it (MemoryStore; a
// PostgresStore's is an uncommitted transaction).
func testStats(t *testing.T, e *env, m mode) {
	ctx := context.Background()
	st, err := e.store.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, server.StoreStats{}, st, "an empty store")
	g := newGate(e)
	mux := http.NewServeMux()
	e.mount(mux, "POST /v1/payments", m, server.Config{}, g)
	srv := serve(t, mux)
	done := make(chan reply)
	go func() { done <- post(t, srv, "/v1/payments", "k-stats", "{}") }()
	recv(t, g.entered)
	e.clock.Advance(10 * time.Second)
	st, err = e.store.Stats(ctx)
	require.NoError(t, err)
	if m == leased {
		assert.Equal(t, 1, st.Running)
		assert.GreaterOrEqual(t, st.OldestRunning, 10*time.Second, "the claim's age")
		assert.Less(t, st.OldestRunning, 20*time.Second)
	} else {
		assert.LessOrEqual(t, st.Running, 1)
	}
	close(g.release)
	assert.Equal(t, http.StatusCreated, recv(t, done).status)
	st, err = e.store.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, server.StoreStats{}, st, "every operation completed")
}
