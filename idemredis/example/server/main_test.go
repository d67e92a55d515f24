package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemredis/internal/redistest"
)

// TestChargesOnRedis runs the program with -redis and makes a charge
// twice: it runs once, the retry replays it, and its record is in Redis
// under the prefix.
func TestChargesOnRedis(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := "idemexample-" + uuid.NewString()[:8]
	ctx, cancel := context.WithCancel(context.Background())
	stdout, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-redis", addr, "-redis-prefix", prefix, "-grace", "2s"}, w, io.Discard, noEnv)
		_ = w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	base := strings.TrimSpace(strings.TrimPrefix(line, "payments server: listening on "))

	send := func(method, path, key, body string) (int, string) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer acme:alice")
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := send(http.MethodPut, "/v1/accounts/acc-1", "", `{"balance_cents": 1000}`)
	require.Equal(t, http.StatusOK, status, body)
	charge := `{"account_id":"acc-1","amount_cents":250,"currency":"EUR"}`
	status, first := send(http.MethodPost, "/v1/charges", "k-redis-1", charge)
	require.Equal(t, http.StatusCreated, status, first)
	status, again := send(http.MethodPost, "/v1/charges", "k-redis-1", charge)
	assert.Equal(t, http.StatusCreated, status)
	assert.Equal(t, first, again, "the retry replays the charge")

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	var found []string
	deadline := time.Now().Add(5 * time.Second)
	for len(found) == 0 && time.Now().Before(deadline) {
		for b := range 16 {
			keys, err := rdb.Keys(context.Background(), "{"+prefix+":"+strconv.Itoa(b)+"}:r:*").Result()
			require.NoError(t, err)
			found = append(found, keys...)
		}
	}
	assert.Len(t, found, 1, "the charge's record is in Redis under %s", prefix)
	for _, k := range found {
		rdb.Del(context.Background(), k)
	}
}

// noEnv is an empty environment: -db is empty, the API in memory, unless
// a test names a database.
func noEnv(string) string { return "" }
