package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stuckRoutes answers every operation Completed, but k-0's function
// sleeps 20 s without looking at its context.
func stuckRoutes(settled *atomic.Int64) map[string]ReconcileFunc {
	return map[string]ReconcileFunc{"POST /v1/charges": func(_ context.Context, op *Abandoned) (Settlement, error) {
		if op.Key == "k-0" {
			time.Sleep(20 * time.Second)
		} else {
			settled.Add(1)
		}
		return Settlement{Answer: Completed, Status: 201, Body: []byte(op.Key)}, nil
	}}
}

// One ReconcileFunc that ignores its context does not hold its pass past
// its lease plus the grace: the 40 others are settled meanwhile, and the
// stuck one's answer, when it comes, is still stored under its fence
// (issue 28 defect 5: with 41 abandoned operations, Batch 16 and Lease 2 s,
// the pass waited the full 20 s for it). The clock is synctest's.
func TestAStuckReconcileFuncDoesNotStallThePass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := memoryKit(t)
		abandon(t, k, 41)
		var settled atomic.Int64
		stuck := make(chan ReconcileEvent, 1)
		rc := testReconciler(t, k, ReconcileConfig{Routes: stuckRoutes(&settled), Batch: 16, Lease: 2 * time.Second,
			Hooks: ReconcileHooks{Settled: func(_ context.Context, e ReconcileEvent) {
				if errors.Is(e.Err, errStuck) {
					stuck <- e
				}
			}}})
		start := time.Now()
		n, err := rc.pass(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 41, n)
		assert.EqualValues(t, 40, settled.Load(), "the others are settled")
		assert.Equal(t, 2*time.Second+rc.cfg.Grace, time.Since(start), "the pass waited for the stuck function its lease plus the grace")
		e := <-stuck
		assert.Equal(t, "k-0", e.Key)
		assert.Equal(t, NotKnown, e.Answer)

		time.Sleep(20 * time.Second) // the stuck function answers
		synctest.Wait()
		res := leasedClaim(t, k, "k-0", 30*time.Second, time.Hour)
		require.Equal(t, VerdictReplay, res.Verdict, "its late answer is stored: no one took the operation over meanwhile")
		assert.Equal(t, "k-0", string(res.Response.Body))
	})
}

// RunReconciler returns within the grace after its context ends, even
// while a ReconcileFunc that ignores its context still runs (it returned
// 14 s after: issue 28 defect 5).
func TestRunReconcilerReturnsWithinTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := memoryKit(t)
		abandon(t, k, 1)
		var settled atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan time.Time)
		cfg := ReconcileConfig{Routes: stuckRoutes(&settled), Lease: 30 * time.Second, Logger: quiet(Config{}).Logger}
		go func() {
			_ = RunReconciler(ctx, k.store, cfg)
			done <- time.Now()
		}()
		time.Sleep(time.Second) // the function is running
		stopped := time.Now()
		cancel()
		returned := <-done
		rc := testReconciler(t, k, cfg)
		assert.Equal(t, rc.cfg.Grace, returned.Sub(stopped), "returned after the grace")
		time.Sleep(20 * time.Second) // the stuck function returns, and its answer is stored
		synctest.Wait()
	})
}
