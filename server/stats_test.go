package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Stats counts the operations in flight and the age of the oldest, by the
// store's clock: a Leased claim in every store, a Transactional one only
// where other sessions can see it (the memory store; a Postgres claim is an
// uncommitted transaction). Completed operations are not counted.
func TestStatsCountsOperationsInFlight(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		ctx := context.Background()
		st, err := k.store.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, StoreStats{}, st, "an empty store")

		g := newGate(t, k)
		mux := http.NewServeMux()
		mux.Handle("POST /v1/charges", Middleware(k.store, quiet(Config{Mode: Leased}))(g))
		mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(g))
		srv := serve(t, mux)
		leased := make(chan reply)
		go func() { leased <- post(t, srv, "/v1/charges", "k-stats-1", "{}") }()
		recv(t, g.entered)
		k.clock.Advance(10 * time.Second)
		tx := make(chan reply)
		go func() { tx <- post(t, srv, "/v1/payments", "k-stats-2", "{}") }()
		recv(t, g.entered)

		st, err = k.store.Stats(ctx)
		require.NoError(t, err)
		want := 2
		if k.pool != nil {
			want = 1 // the Transactional claim has not committed
		}
		assert.Equal(t, want, st.Running)
		assert.GreaterOrEqual(t, st.OldestRunning, 10*time.Second, "the Leased claim's age")
		assert.Less(t, st.OldestRunning, 20*time.Second)

		g.open()
		assert.Equal(t, http.StatusCreated, recv(t, leased).status)
		assert.Equal(t, http.StatusCreated, recv(t, tx).status)
		st, err = k.store.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, StoreStats{}, st, "every operation completed")
	})
}
