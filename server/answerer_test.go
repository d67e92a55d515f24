package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// answeringExchange is a fakeExchange whose framework takes the core's own
// answers as values (server.Answerer), as an RPC adapter does.
type answeringExchange struct {
	fakeExchange
	refusals []server.Refusal
	replays  []*server.Response
	outcome  server.Outcome
	settled  []server.Outcome
}

func (e *answeringExchange) Settled(o server.Outcome) { e.settled = append(e.settled, o) }

func (e *answeringExchange) Refuse(r server.Refusal) { e.refusals = append(e.refusals, r) }

func (e *answeringExchange) Replay(res *server.Response, o server.Outcome) {
	e.replays, e.outcome = append(e.replays, res), o
}

// TestAnswererTakesRefusalsAndReplays: an Exchange that is an Answerer
// gets each refusal and each replay as a value, with where the operation
// stands, and nothing is written to the writer Serve was given.
func TestAnswererTakesRefusalsAndReplays(t *testing.T) {
	a := server.NewAdapter(nil, server.Config{})
	newEx := func() *answeringExchange {
		return &answeringExchange{fakeExchange: fakeExchange{route: "POST /v1/accounts/:id/payments", tenant: "acme", status: http.StatusCreated}}
	}

	ex := newEx()
	w, answered := serveAdapter(a, &ex.fakeExchange, http.MethodPost, "k1")
	require.False(t, answered)
	require.Equal(t, http.StatusCreated, w.Code, "a first request is the handler's, through Next's writer")

	ex = newEx()
	w = serveAnswering(t, a, ex, "k1")
	assert.Empty(t, w.Body.String(), "nothing written for a replay")
	require.Len(t, ex.replays, 1)
	assert.Equal(t, http.StatusCreated, ex.replays[0].Status)
	assert.Equal(t, "made", string(ex.replays[0].Body))
	assert.Equal(t, "completed", ex.outcome.State)
	assert.Equal(t, server.OperationRef("acme", "alice", "POST /v1/accounts/:id/payments", "k1"), ex.outcome.Ref)
	assert.Empty(t, ex.refusals)
	assert.Zero(t, ex.ran, "a replay does not run the chain")

	ex = newEx()
	w = serveAnswering(t, a, ex, "")
	assert.Empty(t, w.Body.String(), "nothing written for a refusal")
	require.Len(t, ex.refusals, 1)
	r := ex.refusals[0]
	assert.Equal(t, "key-missing", r.Problem)
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.NotEmpty(t, r.Title)
	assert.Equal(t, "none", r.Outcome.State)
	assert.True(t, r.Outcome.SafeNewKey)
	assert.Zero(t, r.RetryAfter)
}

// TestAnswererTakesTheOutcomeOfARun: an Answerer gets where the operation
// stands once the handler's answer was settled (Settled), once, in place
// of the outcome headers on the writer: completed with the reference and
// the key's expiry for a stored answer; none, safe, for a failure rolled
// back; nothing for a refusal or a replay.
func TestAnswererTakesTheOutcomeOfARun(t *testing.T) {
	a := server.NewAdapter(nil, server.Config{})
	for _, tc := range []struct {
		status int
		state  string
		safe   bool
	}{
		{http.StatusCreated, "completed", false},
		{http.StatusInternalServerError, "none", true},
	} {
		ex := &answeringExchange{fakeExchange: fakeExchange{route: "POST /v1/x", tenant: "acme", status: tc.status}}
		r := httptest.NewRequest(http.MethodPost, "/v1/x", strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", "k-"+strconv.Itoa(tc.status))
		w := httptest.NewRecorder()
		before := time.Now()
		require.False(t, a.Serve(w, r, ex))
		require.Equal(t, tc.status, w.Code)
		assert.Empty(t, w.Header().Get("Idempotency-Operation-State"), "the outcome goes to Settled, not to the writer")
		require.Len(t, ex.settled, 1, "Settled calls for %d", tc.status)
		o := ex.settled[0]
		assert.Equal(t, tc.state, o.State)
		assert.Equal(t, tc.safe, o.SafeNewKey)
		assert.Equal(t, server.OperationRef("acme", "alice", "POST /v1/x", "k-"+strconv.Itoa(tc.status)), o.Ref)
		if tc.state == "completed" {
			assert.True(t, o.Expires.After(before), "the key's expiry %v", o.Expires)
		}
		assert.Empty(t, ex.refusals)

		again := &answeringExchange{fakeExchange: fakeExchange{route: "POST /v1/x", tenant: "acme", status: tc.status}}
		r = httptest.NewRequest(http.MethodPost, "/v1/x", strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", "k-"+strconv.Itoa(tc.status))
		a.Serve(httptest.NewRecorder(), r, again)
		if tc.state == "completed" {
			assert.Len(t, again.replays, 1)
			assert.Empty(t, again.settled, "a replay is not a run")
		}
	}
}

// TestAnswererTakesTheWaitOfARefusal: a refusal that says to wait (a
// store unavailable) carries its Retry-After as a duration.
func TestAnswererTakesTheWaitOfARefusal(t *testing.T) {
	a := server.NewAdapter(downStore{server.NewMemoryStore()}, server.Config{})
	ex := &answeringExchange{fakeExchange: fakeExchange{route: "POST /v1/x", tenant: "acme", status: http.StatusCreated}}
	serveAnswering(t, a, ex, "k1")
	require.Len(t, ex.refusals, 1)
	assert.Equal(t, "store-unavailable", ex.refusals[0].Problem)
	assert.Equal(t, time.Second, ex.refusals[0].RetryAfter)
	assert.Zero(t, ex.ran)
}

// downStore is a store whose every claim fails.
type downStore struct{ *server.MemoryStore }

func (downStore) Claim(context.Context, *server.Claim) (server.ClaimResult, error) {
	return server.ClaimResult{}, errors.New("the store is down")
}

// serveAnswering serves one POST with key through a and ex, which the core
// must answer itself.
func serveAnswering(t *testing.T, a *server.Adapter, ex *answeringExchange, key string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/accounts/1/payments", strings.NewReader("{}"))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	assert.True(t, a.Serve(w, r, ex), "the core answered itself")
	return w
}
