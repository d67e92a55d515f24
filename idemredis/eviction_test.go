package idemredis

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemredis/internal/redistest"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// syncBuffer is a log destination that tests read while the store writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A maxmemory-policy that may evict, set while the store runs, is noticed
// on the claims' schedule (the clock moved past it) and at once when a
// write finds the record its attempt held gone: claims are refused with
// ErrEviction naming the policy, and the store logs it; noeviction again
// lets claims through. Before, the policy was read only by New.
func TestEvictionPolicyIsWatched(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	var log syncBuffer
	clock := &storetest.Clock{}
	s := newTestStore(t, c, Config{Logger: slog.New(slog.NewTextHandler(&log, nil))}, clock)
	ctx := context.Background()
	claim := func(key string) (server.ClaimResult, error) {
		return s.Claim(ctx, &server.Claim{Scope: [32]byte{byte(len(key)), key[0], key[len(key)-1]}, Route: "POST /v1/charges",
			Key: key, Digest: []byte{1}, DigestAlg: "t", Mode: server.Leased, Lease: time.Minute, Retention: time.Hour})
	}
	policy := func(p string) {
		t.Helper()
		require.NoError(t, c.ConfigSet(ctx, "maxmemory-policy", p).Err())
	}

	_, err := claim("a1")
	require.NoError(t, err)
	policy("allkeys-lru")
	clock.Advance(2 * evictionCheckEvery)
	_, err = claim("b2")
	assert.ErrorIs(t, err, ErrEviction, "a claim after the policy changed to allkeys-lru")
	assert.ErrorContains(t, err, "allkeys-lru")
	assert.Contains(t, log.String(), "level=ERROR", "the refusal is logged")
	assert.Contains(t, log.String(), "allkeys-lru")

	policy("noeviction")
	clock.Advance(2 * evictionCheckEvery)
	res, err := claim("c3")
	require.NoError(t, err, "noeviction again")
	assert.Contains(t, log.String(), "claims are accepted again")

	// An eviction found by a write, before the schedule: the record of the
	// running attempt is gone.
	policy("volatile-lru")
	require.NoError(t, c.Del(ctx, keysOf(s.cfg.Prefix, [32]byte{2, 'c', '3'}, "POST /v1/charges").record).Err())
	assert.ErrorIs(t, res.Attempt.Complete(ctx, &server.Response{Status: 201}), server.ErrLeaseLost)
	_, err = claim("d4")
	assert.ErrorIs(t, err, ErrEviction, "a claim after a write found its record evicted")
	assert.ErrorContains(t, err, "volatile-lru")
}
