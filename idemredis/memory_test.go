package idemredis

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// fillMemory writes 4 MiB of filler keys on the private server c and sets
// maxmemory 1 MiB below what Redis then uses: under noeviction it refuses
// writes that need memory. The returned func deletes the filler and lifts
// the limit.
func fillMemory(t *testing.T, c *redis.Client) (free func()) {
	t.Helper()
	ctx := context.Background()
	chunk := strings.Repeat("x", 64<<10)
	for i := range 64 {
		require.NoError(t, c.Set(ctx, "filler:"+strconv.Itoa(i), chunk, 0).Err())
	}
	used := usedMemory(t, c)
	require.NoError(t, c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used-1<<20, 10)).Err())
	return func() {
		for i := range 64 {
			require.NoError(t, c.Del(ctx, "filler:"+strconv.Itoa(i)).Err())
		}
		require.NoError(t, c.ConfigSet(ctx, "maxmemory", "0").Err())
	}
}

func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no used_memory in INFO memory:\n%s", info)
	return 0
}

// A Redis at maxmemory refuses the claim before the handler runs (503
// store-unavailable, Retry-After), so that the retry after memory is freed
// runs the operation once; before, the claim passed, the handler ran, and
// the completion was refused (500), so the retry ran it again.
func TestFullRedisRefusesTheClaimBeforeTheHandler(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{}, &storetest.Clock{})
	var runs atomic.Int64
	h := server.Middleware(s, server.Config{Mode: server.Leased, Logger: slog.New(slog.DiscardHandler)})(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runs.Add(1)
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprint(w, `{"id":"ch_1"}`)
		}))
	charge := func() *http.Response {
		req := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Idempotency-Key", "full-1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Result()
	}

	free := fillMemory(t, c)
	res := charge()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "a claim at maxmemory")
	assert.Equal(t, "1", res.Header.Get("Retry-After"))
	assert.Zero(t, runs.Load(), "the handler ran on a store that could not record its outcome")

	free()
	res = charge()
	assert.Equal(t, http.StatusCreated, res.StatusCode, "the retry once memory is freed")
	res = charge()
	assert.Equal(t, "true", res.Header.Get("Idempotent-Replayed"), "the next retry replays")
	assert.Equal(t, int64(1), runs.Load(), "the operation ran once")
}

// An admitted attempt records its outcome even when Redis reached
// maxmemory while its handler ran: its effect happened, and a lost
// completion would let a retry run it again.
func TestCompletionLandsAtMaxmemory(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{}, &storetest.Clock{})
	ctx := context.Background()
	claim := &server.Claim{Scope: [32]byte{7}, Route: "POST /v1/charges", Key: "k", Digest: []byte{1}, DigestAlg: "t",
		Mode: server.Leased, Lease: time.Minute, Retention: time.Hour}
	res, err := s.Claim(ctx, claim)
	require.NoError(t, err)
	require.Equal(t, server.VerdictClaimed, res.Verdict)
	att := res.Attempt.(server.LeasedAttempt)

	free := fillMemory(t, c)
	require.NoError(t, att.Extend(ctx, time.Minute, time.Minute), "an extension at maxmemory")
	require.NoError(t, att.Checkpoint(ctx, "charged", []byte(`{"id":"ch_1"}`)), "a recovery point at maxmemory")
	require.NoError(t, att.Complete(ctx, &server.Response{Status: 201, Body: []byte(strings.Repeat("b", 4096))}),
		"a completion at maxmemory")
	_, err = s.Claim(ctx, claim)
	assert.ErrorContains(t, err, "OOM", "a claim at maxmemory, even a replay, is refused")

	free()
	again, err := s.Claim(ctx, claim)
	require.NoError(t, err)
	assert.Equal(t, server.VerdictReplay, again.Verdict, "the completion was recorded")
}
