package idemredis

import (
	"context"
	"encoding/json"
	"io"
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
	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// The acceptance of issue 46 item 2 on Redis: an operation that a
// reconciler cannot tell by MaxAge becomes uncertain (409
// outcome-uncertain, its record without expiry), and is settled both
// ways: applied (later retries replay the response) and not applied (the
// next retry runs afresh).
func TestUncertainSettledBothWaysEndToEnd(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{}, &storetest.Clock{})
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		ls, _ := server.LeaseFrom(r.Context())
		_ = ls.Checkpoint(r.Context(), "charged", json.RawMessage(`{"charge":"ch_1"}`))
		w.WriteHeader(http.StatusBadGateway)
	})
	const route = "POST /v1/charges"
	mux := http.NewServeMux()
	cfg := server.Config{Mode: server.Leased, Logger: slog.New(slog.DiscardHandler),
		Scope: func(*http.Request) (string, string) { return "acme", "alice" }}
	mux.Handle(route, server.Middleware(s, cfg)(h))
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	post := func(key string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/charges", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for _, key := range []string{"u-applied", "u-not"} {
		resp, _ := post(key)
		require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	}

	parked := make(chan struct{}, 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.RunReconciler(ctx, s, server.ReconcileConfig{MaxAge: time.Nanosecond, Interval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
			Routes: map[string]server.ReconcileFunc{route: func(context.Context, *server.Abandoned) (server.Settlement, error) {
				return server.Settlement{Answer: server.NotKnown}, nil
			}},
			Hooks: server.ReconcileHooks{Parked: func(context.Context, server.ReconcileEvent) { parked <- struct{}{} }}})
	}()
	for range 2 {
		select {
		case <-parked:
		case <-time.After(30 * time.Second):
			t.Fatal("the reconciler left nothing uncertain")
		}
	}
	cancel()
	<-done

	resp, body := post("u-applied")
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	assert.Contains(t, body, wire.ProblemOutcomeUncertain)
	assert.Empty(t, resp.Header.Get("Retry-After"))
	assert.Equal(t, wire.StateUncertain, resp.Header.Get(wire.HeaderOperationState))
	k := keysOf(s.cfg.Prefix, fingerprint.Scope("acme", "alice", route, "u-applied"), route)
	ttl, err := c.PTTL(context.Background(), k.record).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ttl, "an uncertain record has no expiry")
	assert.EqualValues(t, 2, runs.Load(), "never run again")

	_, err = s.Resolve(context.Background(), server.Operation{Tenant: "acme", Principal: "alice", Route: route, Key: "u-applied"},
		server.Resolution{Applied: true, By: "ops", Reason: "T-1", Retention: time.Hour,
			Response: &server.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"charge":"ch_1"}`)}})
	require.NoError(t, err)
	resp, body = post("u-applied")
	assert.Equal(t, http.StatusCreated, resp.StatusCode, body)
	assert.JSONEq(t, `{"charge":"ch_1"}`, body)
	assert.Equal(t, "true", resp.Header.Get(wire.HeaderReplayed))
	ttl, err = c.PTTL(context.Background(), k.record).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 59*time.Minute, "an applied record is kept its retention again")

	rec, err := s.Resolve(context.Background(), server.Operation{Tenant: "acme", Principal: "alice", Route: route, Key: "u-not"},
		server.Resolution{By: "ops", Reason: "T-2", Retention: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, "not-applied", rec.State)
	resp, _ = post("u-not")
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode, "the key is free: the handler runs afresh")
	assert.EqualValues(t, 3, runs.Load())
	_, err = s.Resolve(context.Background(), server.Operation{Tenant: "acme", Principal: "alice", Route: route, Key: "u-applied"},
		server.Resolution{By: "ops", Reason: "again", Retention: time.Hour})
	assert.ErrorIs(t, err, server.ErrNotUncertain)
}

// A replay tells when the record expires, by Redis's clock, so that the
// middleware sends Idempotency-Key-Expires.
func TestReplayTellsTheExpiry(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{}, &storetest.Clock{})
	claim := &server.Claim{Scope: fingerprint.Scope("t", "p", "POST /x", "k"), Route: "POST /x", Key: "k",
		Digest: []byte{1}, DigestAlg: fingerprint.Alg, Mode: server.Leased, Lease: time.Minute, Retention: time.Hour}
	start := time.Now()
	res, err := s.Claim(context.Background(), claim)
	require.NoError(t, err)
	require.NoError(t, res.Attempt.Complete(context.Background(), &server.Response{Status: 201, Header: http.Header{}}))
	res, err = s.Claim(context.Background(), claim)
	require.NoError(t, err)
	require.Equal(t, server.VerdictReplay, res.Verdict)
	assert.WithinRange(t, res.Expires, start.Add(time.Hour-time.Second), time.Now().Add(time.Hour+time.Second))
}
