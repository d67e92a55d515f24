package idemredis

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemredis/internal/redistest"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

func TestNewRefusesEviction(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []string{"allkeys-lru", "volatile-ttl"} {
		srv := redistest.Start(t, "--maxmemory-policy", policy)
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = c.Close() })
		_, err := New(ctx, c, Config{})
		assert.ErrorIs(t, err, ErrEviction, policy)
		assert.ErrorContains(t, err, policy)
		_, err = New(ctx, c, Config{AllowEviction: true})
		assert.NoError(t, err, "%s, told to allow it", policy)
	}
	_, err := New(ctx, redis.NewClient(&redis.Options{Addr: redistest.Addr(t)}), Config{Prefix: "a{b}"})
	assert.ErrorIs(t, err, errPrefix)
}

func TestTransactionalRoutesAreRefused(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{}, &storetest.Clock{})
	assert.ErrorIs(t, s.CheckMode(server.Transactional), ErrTransactional)
	assert.NoError(t, s.CheckMode(server.Leased))
	func() {
		defer func() {
			err, _ := recover().(error)
			assert.ErrorIs(t, err, ErrTransactional, "Middleware refuses the route when it is built")
		}()
		server.Middleware(s, server.Config{})
		t.Error("a Transactional route was mounted on a Redis store")
	}()
	_, err := s.Claim(context.Background(), &server.Claim{Mode: server.Transactional})
	assert.ErrorIs(t, err, ErrTransactional)
}

// With Config.Replicas, a claim that the replica does not acknowledge (it
// is stalled) fails and is given back; one it acknowledges counts.
func TestReplicasAcknowledgeClaims(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.Replica(t, master)
	c := redis.NewClient(&redis.Options{Addr: master.Addr})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{Replicas: 1, ReplicaTimeout: 200 * time.Millisecond}, &storetest.Clock{})
	ctx := context.Background()
	claim := func(key string) (server.ClaimResult, error) {
		return s.Claim(ctx, &server.Claim{Scope: [32]byte{byte(len(key)), key[0]}, Route: "POST /v1/charges", Key: key,
			Digest: []byte{1}, DigestAlg: "t", Mode: server.Leased, Lease: time.Minute, Retention: time.Hour})
	}
	res, err := claim("acked")
	require.NoError(t, err)
	require.Equal(t, server.VerdictClaimed, res.Verdict)
	require.NoError(t, res.Attempt.(server.LeasedAttempt).Checkpoint(ctx, "p", nil))

	require.NoError(t, replica.Stop())
	t.Cleanup(func() { _ = replica.Continue() })
	_, err = claim("stalled")
	assert.ErrorIs(t, err, ErrNotReplicated, "a claim the replica did not acknowledge")
	assert.ErrorIs(t, res.Attempt.(server.LeasedAttempt).Checkpoint(ctx, "q", nil), ErrNotReplicated)
	require.NoError(t, replica.Continue())
	again, err := claim("stalled")
	require.NoError(t, err)
	assert.Equal(t, server.VerdictClaimed, again.Verdict, "the unacknowledged claim was given back")
	assert.Equal(t, 1, again.Attempt.Number())
}

// Retention is key expiry: a record's key lives until the later of its
// retention and its lease's end, and no longer, so that Redis deletes it
// by itself; a completion leaves it to its retention and takes it out of
// the indexes.
func TestRetentionIsKeyExpiry(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{}, &storetest.Clock{})
	ctx := context.Background()
	claim := func(key string, lease, retention time.Duration) (server.ClaimResult, keys) {
		t.Helper()
		cl := &server.Claim{Scope: [32]byte{byte(len(key)), key[0], key[len(key)-1]}, Route: "POST /v1/charges", Key: key,
			Digest: []byte{1}, DigestAlg: "t", Mode: server.Leased, Lease: lease, Retention: retention}
		res, err := s.Claim(ctx, cl)
		require.NoError(t, err)
		require.Equal(t, server.VerdictClaimed, res.Verdict)
		return res, keysOf(s.cfg.Prefix, cl.Scope, cl.Route)
	}
	ttl := func(key string) time.Duration {
		t.Helper()
		d, err := c.PTTL(ctx, key).Result()
		require.NoError(t, err)
		return d
	}
	within := func(got, want time.Duration, what string) {
		t.Helper()
		assert.True(t, got > want-time.Minute && got <= want, "%s: PTTL %s, want about %s", what, got, want)
	}

	res, k := claim("k-done", time.Minute, 3*time.Hour)
	within(ttl(k.record), 3*time.Hour, "a running record lives to its retention")
	require.NoError(t, res.Attempt.Complete(ctx, &server.Response{Status: 201}))
	within(ttl(k.record), 3*time.Hour, "a completed record lives to its retention")
	for _, index := range []string{k.due, k.running} {
		n, err := c.ZCard(ctx, index).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "%s: a completed record leaves the indexes", index)
	}

	res, k = claim("k-long", 2*time.Hour, time.Hour)
	within(ttl(k.record), 2*time.Hour, "a lease longer than the retention keeps the record to its end")
	require.NoError(t, res.Attempt.(server.LeasedAttempt).Extend(ctx, 5*time.Hour, time.Hour))
	within(ttl(k.record), 6*time.Hour, "an extension keeps it a margin past the lease's new end")
}

// With Config.Replicas, a completion that the replica does not acknowledge
// is not released: the client gets 503 (commit-failed, Retry-After), a
// retry gets no replay either while the replica lags, and once it has the
// completion the retry replays it; the handler runs once.
func TestReplicasAcknowledgeCompletions(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.Replica(t, master)
	c := redis.NewClient(&redis.Options{Addr: master.Addr})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{Replicas: 1, ReplicaTimeout: 200 * time.Millisecond}, &storetest.Clock{})
	t.Cleanup(func() { _ = replica.Continue() })
	var runs atomic.Int64
	rec := &lastClaim{Store: s}
	h := server.Middleware(rec, server.Config{Mode: server.Leased, Logger: slog.New(slog.DiscardHandler)})(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runs.Add(1)
			require.NoError(t, replica.Stop(), "the replica stalls while the handler acts")
			w.WriteHeader(http.StatusCreated)
		}))
	charge := func() *http.Response {
		req := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Idempotency-Key", "acked-completion")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Result()
	}

	other := redis.NewClient(&redis.Options{Addr: master.Addr, PoolSize: 1})
	t.Cleanup(func() { _ = other.Close() })
	require.NoError(t, other.Ping(context.Background()).Err())
	node := *s
	node.c = other

	res := charge()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "a completion the replica did not acknowledge")
	assert.Equal(t, "1", res.Header.Get("Retry-After"))
	res = charge()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "a replay of a completion the replica may not have")
	// Another node, whose connection opened before the completion and
	// wrote nothing since: WAIT promises to cover only the connection's
	// own writes (Redis's documented contract), so the replay writes
	// before it waits, and is refused on this node too. (Redis 7.0 counts
	// a read-only EVAL's WAIT from the master's offset anyway, so this
	// assertion holds without that write there.)
	_, err := node.Claim(context.Background(), rec.last)
	assert.ErrorIs(t, err, ErrNotReplicated, "a replay on a node that wrote nothing yet")
	require.NoError(t, replica.Continue())
	res = charge()
	assert.Equal(t, http.StatusCreated, res.StatusCode)
	assert.Equal(t, "true", res.Header.Get("Idempotent-Replayed"), "the retry replays once the replica has it")
	assert.Equal(t, int64(1), runs.Load())
}

// lastClaim is a store that keeps the last claim it was asked, for a test
// that asks another node the same.
type lastClaim struct {
	server.Store
	last *server.Claim
}

func (l *lastClaim) Claim(ctx context.Context, c *server.Claim) (server.ClaimResult, error) {
	l.last = c
	return l.Store.Claim(ctx, c)
}
