package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// storeRecords completes n requests with keys prefix0.. through a
// middleware with the given retention.
func storeRecords(t *testing.T, k *kit, retention time.Duration, prefix string, n int) {
	t.Helper()
	mux, _ := payServer(t, k, Config{Retention: retention})
	srv := serve(t, mux)
	for i := range n {
		r := post(t, srv, "/v1/payments", fmt.Sprintf("%s%d", prefix, i), `{"amount": 1}`)
		require.Equal(t, http.StatusCreated, r.status, r.body)
	}
}

func TestSweepDeletesExpiredInBatches(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		storeRecords(t, k, 48*time.Hour, "live", 5)
		storeRecords(t, k, time.Hour, "old", 25)
		k.clock.Advance(2 * time.Hour)
		ctx := context.Background()
		for i, want := range []int{10, 10, 5, 0} {
			n, err := k.store.Sweep(ctx, 10)
			require.NoError(t, err)
			assert.Equal(t, want, n, "batch %d", i)
		}
		mux, p := payServer(t, k, Config{Retention: 48 * time.Hour})
		srv := serve(t, mux)
		assert.True(t, post(t, srv, "/v1/payments", "live0", `{"amount": 1}`).replayed(), "a live record stays")
		assert.False(t, post(t, srv, "/v1/payments", "old0", `{"amount": 1}`).replayed(), "a swept record is gone")
		assert.EqualValues(t, 1, p.runs.Load())
		if k.pool != nil {
			var rows int
			require.NoError(t, k.pool.QueryRow(ctx, `SELECT count(*) FROM idem_records`).Scan(&rows))
			assert.Equal(t, 6, rows, "5 live records and the new old0")
		}
	})
}

// TestSweepSkipsRecordsInUse: a sweep never deletes, nor waits for, the
// record of a request that is running. A new Transactional claim in
// Postgres writes no row until it commits, so there is nothing to skip:
// that case runs on the MemoryStore alone, which keeps the running record.
func TestSweepSkipsRecordsInUse(t *testing.T) {
	t.Run("new claim", func(t *testing.T) {
		t.Parallel()
		sweepWhileRunning(t, memoryKit(t), false)
	})
	t.Run("reclaim of an expired record", func(t *testing.T) {
		eachStore(t, func(t *testing.T, k *kit) { sweepWhileRunning(t, k, true) })
	})
}

// sweepWhileRunning sweeps, past its retention, the record of a request
// that still runs: a new claim, or the reclaim of an expired record.
func sweepWhileRunning(t *testing.T, k *kit, expiredBefore bool) {
	t.Helper()
	if expiredBefore {
		storeRecords(t, k, time.Hour, "k-busy", 1) // key "k-busy0"
		k.clock.Advance(2 * time.Hour)
	}
	g := newGate(t, k)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{Retention: time.Hour}))(g))
	srv := serve(t, mux)
	first := make(chan reply)
	go func() { first <- post(t, srv, "/v1/payments", "k-busy0", `{"amount": 1}`) }()
	recv(t, g.entered)
	k.clock.Advance(2 * time.Hour) // past the retention of the running claim too
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := k.store.Sweep(ctx, 100) // must not wait for the request's transaction
	require.NoError(t, err)
	assert.Equal(t, 0, n, "a record a request holds is never swept")
	g.open()
	r := recv(t, first)
	assert.Equal(t, http.StatusCreated, r.status, "and the request still commits")
	assert.False(t, r.replayed())
}

func TestRunSweeper(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		storeRecords(t, k, time.Hour, "old", 5)
		k.clock.Advance(2 * time.Hour)
		deleted := sweepOnce(t, k.store, SweepConfig{Batch: 2, Logger: quiet(Config{}).Logger})
		assert.Equal(t, 5, deleted, "the first sweep runs at once, batch after batch")
	})
}
