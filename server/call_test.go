package server_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// serveCall serves one call through a and ex with key ("": none), as an
// RPC adapter does.
func serveCall(a *server.Adapter, ex *fakeExchange, key string) server.CallAnswer {
	h := http.Header{}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return a.ServeCall(context.Background(), h, []byte("{}"), ex)
}

// TestServeCallTakesRefusalsAndReplays: ServeCall hands back each refusal
// and each replay as a value, with where the operation stands; the
// handler runs only for the first call.
func TestServeCallTakesRefusalsAndReplays(t *testing.T) {
	a := server.NewAdapter(nil, server.Config{})
	newEx := func() *fakeExchange {
		return &fakeExchange{route: "POST /v1/accounts/:id/payments", tenant: "acme", status: http.StatusCreated}
	}
	ref := server.OperationRef("acme", "alice", "POST /v1/accounts/:id/payments", "k1")

	ex := newEx()
	ans := serveCall(a, ex, "k1")
	assert.True(t, ans.Ran)
	assert.Equal(t, 1, ex.ran)
	assert.Nil(t, ans.Refusal)
	assert.Nil(t, ans.Replay)
	assert.Equal(t, "completed", ans.Outcome.State)

	ex = newEx()
	ans = serveCall(a, ex, "k1")
	require.NotNil(t, ans.Replay)
	assert.Equal(t, http.StatusCreated, ans.Replay.Status)
	assert.Equal(t, "made", string(ans.Replay.Body))
	assert.Equal(t, "completed", ans.Outcome.State)
	assert.Equal(t, ref, ans.Outcome.Ref)
	assert.Nil(t, ans.Refusal)
	assert.False(t, ans.Ran)
	assert.Zero(t, ex.ran, "a replay does not run the chain")

	ex = newEx()
	ans = serveCall(a, ex, "")
	require.NotNil(t, ans.Refusal)
	r := ans.Refusal
	assert.Equal(t, "key-missing", r.Problem)
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.NotEmpty(t, r.Title)
	assert.Equal(t, "none", r.Outcome.State)
	assert.Equal(t, r.Outcome, ans.Outcome)
	assert.True(t, r.Outcome.SafeNewKey)
	assert.Zero(t, r.RetryAfter)
	assert.Zero(t, ex.ran)
}

// TestServeCallTakesTheOutcomeOfARun: a call that ran gets where its
// operation stands once the handler's answer was settled: completed with
// the reference and the key's expiry for a stored answer; none, safe, for
// a failure rolled back; the stored answer carries no outcome headers (a
// replay gets its own).
func TestServeCallTakesTheOutcomeOfARun(t *testing.T) {
	a := server.NewAdapter(nil, server.Config{})
	for _, tc := range []struct {
		status int
		state  string
		safe   bool
	}{
		{http.StatusCreated, "completed", false},
		{http.StatusInternalServerError, "none", true},
	} {
		key := "k-" + strconv.Itoa(tc.status)
		before := time.Now()
		ans := serveCall(a, &fakeExchange{route: "POST /v1/x", tenant: "acme", status: tc.status}, key)
		require.True(t, ans.Ran)
		require.Nil(t, ans.Refusal)
		o := ans.Outcome
		assert.Equal(t, tc.state, o.State)
		assert.Equal(t, tc.safe, o.SafeNewKey)
		assert.Equal(t, server.OperationRef("acme", "alice", "POST /v1/x", key), o.Ref)
		if tc.state == "completed" {
			assert.True(t, o.Expires.After(before), "the key's expiry %v", o.Expires)
		}

		again := serveCall(a, &fakeExchange{route: "POST /v1/x", tenant: "acme", status: tc.status}, key)
		if tc.state == "completed" {
			require.NotNil(t, again.Replay)
			assert.Empty(t, again.Replay.Header.Get("Idempotency-Operation-State"), "the outcome is not stored with the answer")
			assert.False(t, again.Ran)
		} else {
			assert.True(t, again.Ran, "a failure rolled back runs again")
		}
	}
}

// TestServeCallTakesTheWaitOfARefusal: a refusal that says to wait (a
// store unavailable) carries its Retry-After as a duration.
func TestServeCallTakesTheWaitOfARefusal(t *testing.T) {
	a := server.NewAdapter(downStore{server.NewMemoryStore()}, server.Config{})
	ex := &fakeExchange{route: "POST /v1/x", tenant: "acme", status: http.StatusCreated}
	ans := serveCall(a, ex, "k1")
	require.NotNil(t, ans.Refusal)
	assert.Equal(t, "store-unavailable", ans.Refusal.Problem)
	assert.Equal(t, time.Second, ans.Refusal.RetryAfter)
	assert.Zero(t, ex.ran)
}

// downStore is a store whose every claim fails.
type downStore struct{ *server.MemoryStore }

func (downStore) Claim(context.Context, *server.Claim) (server.ClaimResult, error) {
	return server.ClaimResult{}, errors.New("the store is down")
}
