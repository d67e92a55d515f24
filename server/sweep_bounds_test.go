package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
)

// TestConcurrentSweepsKeepLiveRecords: two nodes sweep one table at once,
// round after round as the clock moves an hour at a time. In every round
// exactly the records whose retention ended go, each deleted once; a
// record inside its retention, and one whose lease is live past its
// expiry, stay. In memory both sweepers share the one store.
func TestConcurrentSweepsKeepLiveRecords(t *testing.T) {
	const rounds, perRound = 4, 12
	eachStore(t, func(t *testing.T, k *kit) {
		storeRecords(t, k, 48*time.Hour, "live", 5)
		for g := range rounds {
			storeRecords(t, k, time.Duration(g+1)*time.Hour, fmt.Sprintf("g%d-", g), perRound)
		}
		storeRecords(t, k, time.Hour, "held", 3)
		holdLeases(t, k, "held", 100*time.Hour)
		a, b := k.store, secondNode(t, k)
		for round := 1; round <= rounds; round++ {
			k.clock.Advance(time.Hour + time.Minute)
			deleted := sweepTogether(t, a, b)
			assert.Equal(t, perRound, deleted, "round %d: records deleted by both nodes", round)
			assert.Equal(t, keysWanted(round, rounds, perRound), keysLeft(t, k), "round %d: records left", round)
		}
	})
}

// sweepTogether runs, at once, a RunSweeper pass on a (batches of 2) and a
// loop of Sweep(3) on b until it finds nothing, and returns how many
// records they deleted together.
func sweepTogether(t *testing.T, a, b Store) int {
	t.Helper()
	var total atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		total.Add(int64(sweepOnce(t, a, SweepConfig{Batch: 2, Logger: slog.New(slog.DiscardHandler)})))
	})
	wg.Go(func() {
		for {
			n, err := b.Sweep(context.Background(), 3)
			if !assert.NoError(t, err) || n == 0 {
				return
			}
			total.Add(int64(n))
		}
	})
	wg.Wait()
	return int(total.Load())
}

// keysWanted is the keys that TestConcurrentSweepsKeepLiveRecords must
// find after round: the live and held records, and the generations not
// yet expired.
func keysWanted(round, rounds, perRound int) []string {
	var keys []string
	for i := range 5 {
		keys = append(keys, fmt.Sprintf("live%d", i))
	}
	for i := range 3 {
		keys = append(keys, fmt.Sprintf("held%d", i))
	}
	for g := round; g < rounds; g++ {
		for i := range perRound {
			keys = append(keys, fmt.Sprintf("g%d-%d", g, i))
		}
	}
	slices.Sort(keys)
	return keys
}

// secondNode is another node's store on k's records: a PostgresStore on a
// pool of its own, or, in memory, the same store.
func secondNode(t *testing.T, k *kit) Store {
	t.Helper()
	if k.pool == nil {
		return k.store
	}
	s := NewPostgresStore(pgtest.NewPool(t, k.url))
	s.clock = k.clock.offset
	return s
}

// holdLeases turns the records whose keys start with prefix into running
// Leased operations whose lease lasts for d more, as a handler that keeps
// extending its lease past the retention would.
func holdLeases(t *testing.T, k *kit, prefix string, d time.Duration) {
	t.Helper()
	if k.pool != nil {
		tag, err := k.pool.Exec(context.Background(), `UPDATE idem_records SET state = 'running',
			locked_until = statement_timestamp() + $2::interval + $3::interval WHERE idem_key LIKE $1 || '%'`,
			prefix, k.clock.offset(), d)
		require.NoError(t, err)
		require.NotZero(t, tag.RowsAffected())
		return
	}
	m := k.store.(*MemoryStore)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rec := range m.recs {
		if strings.HasPrefix(rec.op.Key, prefix) {
			rec.state, rec.mode, rec.lockedUntil = stateRunning, Leased, k.clock.now().Add(d)
		}
	}
}

// keysLeft is the sorted keys of the records in k's store.
func keysLeft(t *testing.T, k *kit) []string {
	t.Helper()
	var keys []string
	if k.pool != nil {
		rows, err := k.pool.Query(context.Background(), `SELECT idem_key FROM idem_records`)
		require.NoError(t, err)
		for rows.Next() {
			var key string
			require.NoError(t, rows.Scan(&key))
			keys = append(keys, key)
		}
		require.NoError(t, rows.Err())
	} else {
		m := k.store.(*MemoryStore)
		m.mu.Lock()
		for _, rec := range m.recs {
			keys = append(keys, rec.op.Key)
		}
		m.mu.Unlock()
	}
	slices.Sort(keys)
	return keys
}

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

// countingStore counts the Sweep calls made to its Store.
type countingStore struct {
	Store
	sweeps atomic.Int64
}

func (s *countingStore) Sweep(ctx context.Context, limit int) (int, error) {
	s.sweeps.Add(1)
	return s.Store.Sweep(ctx, limit)
}

// TestSweepBatchesAreBounded: one Sweep deletes at most its limit however
// many records expired, and a RunSweeper pass runs at most MaxBatches
// batches, warning that the sweeper is not keeping up when it stops
// there; a pass that finishes its backlog does not warn.
func TestSweepBatchesAreBounded(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		storeRecords(t, k, time.Hour, "old", 30)
		k.clock.Advance(2 * time.Hour)
		n, err := k.store.Sweep(context.Background(), 7)
		require.NoError(t, err)
		assert.Equal(t, 7, n, "Sweep(7) with 30 expired")
		assert.Len(t, keysLeft(t, k), 23)

		store := &countingStore{Store: k.store}
		logs := &syncBuffer{}
		deleted := sweepOnce(t, store, SweepConfig{Batch: 4, MaxBatches: 3, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		assert.Equal(t, 12, deleted, "a pass of 3 batches of 4")
		assert.EqualValues(t, 3, store.sweeps.Load(), "batches of the pass")
		assert.Len(t, keysLeft(t, k), 11)
		require.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "a pass stopped at MaxBatches warns: %s", logs)
		assert.Contains(t, logs.String(), "not keeping up")
		assert.Contains(t, logs.String(), "max_batches=3")

		logs = &syncBuffer{}
		deleted = sweepOnce(t, store, SweepConfig{Batch: 4, MaxBatches: 10, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		assert.Equal(t, 11, deleted, "the rest of the backlog")
		assert.EqualValues(t, 3+3, store.sweeps.Load(), "4 + 4 + 3: the short batch ends the pass")
		assert.NotContains(t, logs.String(), "level=WARN", "a pass that finished its backlog")
		assert.Equal(t, 1, strings.Count(logs.String(), "level=INFO"), "one record of the pass: %s", logs)
	})
}

// sweepOnce runs one RunSweeper pass on store and returns what it deleted.
func sweepOnce(t *testing.T, store Store, cfg SweepConfig) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	swept := make(chan int, 1)
	cfg.Interval = time.Hour
	cfg.OnSweep = func(n int, err error) {
		assert.NoError(t, err)
		swept <- n
	}
	done := make(chan error, 1)
	go func() { done <- RunSweeper(ctx, store, cfg) }()
	n := recv(t, swept)
	cancel()
	assert.ErrorIs(t, recv(t, done), context.Canceled)
	return n
}
