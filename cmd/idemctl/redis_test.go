package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemredis"
	"github.com/idemkit/idem/server"
)

// redisAddr is the machine's Redis (REDIS_ADDR, else 127.0.0.1:6379); the
// test skips without one, and fails under CI=true.
func redisAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Redis at %s (REDIS_ADDR): %v; under CI=true the Redis tests must run", addr, err)
		}
		t.Skipf("no Redis at %s (REDIS_ADDR): %v", addr, err)
	}
	return addr
}

// redisCharges makes charges as charges does, on an idemredis store under
// a prefix of the test's own (its keys deleted when the test ends), and
// returns the prefix.
func redisCharges(t *testing.T, addr string, keys ...string) string {
	t.Helper()
	ctx := context.Background()
	prefix := "idemctl-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() {
		iter := c.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		_ = c.Close()
	})
	store, err := idemredis.New(ctx, c, idemredis.Config{Prefix: prefix})
	require.NoError(t, err)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls, _ := server.LeaseFrom(r.Context())
		_ = ls.Checkpoint(r.Context(), "gateway-called", nil)
		op, _ := server.OperationFrom(r.Context())
		if strings.HasPrefix(op.Key, "stuck-") {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"charge_id":"ch_1"}`))
	})
	mux := http.NewServeMux()
	cfg := server.Config{Mode: server.Leased, Scope: func(*http.Request) (string, string) { return "acme", "alice" },
		Logger: slog.New(slog.DiscardHandler)}
	mux.Handle("POST /v1/charges", server.Middleware(store, cfg)(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, key := range keys {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	return prefix
}

// idemctl reads and evicts the records of an idemredis store with -redis,
// without a database.
func TestRecordsOnRedis(t *testing.T) {
	addr := redisAddr(t)
	prefix := redisCharges(t, addr, "done-1", "done-2", "stuck-1")
	on := []string{"-redis", "redis://" + addr + "/0", "-redis-prefix", prefix}
	rctl := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		return ctl(t, "", stdin, append(append([]string{}, on...), args...)...)
	}

	code, out, errOut := rctl("", withScope("key", "-payload", "done-1")...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "done")
	assert.Contains(t, out, `{"charge_id":"ch_1"}`)
	code, out, errOut = rctl("", "key", "done-2")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "POST /v1/charges")

	code, out, _ = rctl("", "inflight", "-stuck")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "stuck-1")
	code, out, _ = rctl("", "-json", "stats")
	require.Equal(t, exitOK, code)
	var s statsView
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	assert.EqualValues(t, 3, s.Records.Records)
	assert.Equal(t, "exact", s.Records.RecordsAre)
	assert.Equal(t, 1, s.Records.Stuck)

	code, out, errOut = rctl("", withScope("evict", "-yes", "stuck-1")...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "evicted")
	code, _, _ = rctl("", withScope("key", "stuck-1")...)
	assert.Equal(t, exitNotFound, code)

	code, _, errOut = rctl("", "parked")
	assert.Equal(t, exitUsage, code, "the outbox lives in the database: %s", errOut)
	assert.Contains(t, errOut, "no database")
}
