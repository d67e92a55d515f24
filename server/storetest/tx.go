package storetest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// txAreas check the rules of [server.TxAttempt] on a store whose
// Transactional handlers work in the claim's database transaction: the
// handler's effect (Harness.Effect) commits with the record or vanishes
// with it.
var txAreas = []area{
	{"TxEffectCommitsWithTheRecord", onlyTransactional, testTxCommits},
	{"TxServerErrorRollsBack", onlyTransactional, testTxServerError},
	{"TxPanicRollsBack", onlyTransactional, testTxPanic},
	{"TxEndedByTheHandlerIsCaught", onlyTransactional, testTxEnded},
	{"TxLostConnectionIsCommitFailed", onlyTransactional, testTxLostConn},
	{"TxRaceOfOneKeyOnTwoNodes", onlyTransactional, testTxRace},
}

// txHandler makes the "pay" effect in the request's transaction, which
// the store must hand it, then fails as X-Fail says ("500", "panic",
// "end": ends the transaction through Harness.EndTx, "lose": breaks its
// connection through Harness.LoseConn) or answers 201 with its run number.
type txHandler struct {
	e    *env
	runs atomic.Int64
}

func (h *txHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.runs.Add(1)
	ctx := r.Context()
	did, err := h.e.h.Effect(ctx, "pay")
	if !did || err != nil {
		h.e.t.Errorf("Harness.Effect in a Transactional handler = %v, %v; want the effect made in the request's transaction", did, err)
		http.Error(w, fmt.Sprint(err), http.StatusInternalServerError)
		return
	}
	switch r.Header.Get("X-Fail") {
	case "500":
		http.Error(w, "failed after its effect", http.StatusInternalServerError)
		return
	case "panic":
		panic("storetest: the handler panics after its effect")
	case "end":
		assert.NoError(h.e.t, h.e.h.EndTx(ctx), "Harness.EndTx")
	case "lose":
		assert.NoError(h.e.t, h.e.h.LoseConn(ctx), "Harness.LoseConn")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"run":%d}`, n)
}

// txServer serves a txHandler at POST /v1/payments over store.
func (e *env) txServer(store server.Store, h *txHandler) *httptest.Server {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", server.Middleware(store, config(transactional, server.Config{}))(h))
	return serve(e.t, mux)
}

// txPost posts to the txHandler at url, failing as fail says ("" for not).
func txPost(t *testing.T, srv *httptest.Server, key, fail string) reply {
	t.Helper()
	var extra []string
	if fail != "" {
		extra = []string{"X-Fail", fail}
	}
	return post(t, srv, "/v1/payments", key, "{}", extra...)
}

func testTxCommits(t *testing.T, e *env, _ mode) {
	h := &txHandler{e: e}
	srv := e.txServer(e.store, h)
	first := txPost(t, srv, "k-tx", "")
	require.Equal(t, http.StatusCreated, first.status, first.body)
	again := txPost(t, srv, "k-tx", "")
	assert.True(t, again.replayed(), "the retry replays: %d %s", again.status, again.body)
	assert.Equal(t, first.status, again.status)
	assert.Equal(t, first.body, again.body, "the replay is byte for byte")
	assert.Equal(t, first.header.Get("Content-Type"), again.header.Get("Content-Type"))
	assert.EqualValues(t, 1, h.runs.Load(), "handler runs")
	assert.Equal(t, 1, e.count("pay"), "the effect committed once, with the record")
}

// failThenRetry sends a request that fails as fail says, checks that its
// effect vanished, and that the retry runs afresh and commits one effect.
func (e *env) failThenRetry(t *testing.T, fail string, check func(r reply)) {
	h := &txHandler{e: e}
	srv := e.txServer(e.store, h)
	check(txPost(t, srv, "k-"+fail, fail))
	assert.Equal(t, 0, e.count("pay"), "the failed attempt's effect rolled back")
	retry := txPost(t, srv, "k-"+fail, "")
	require.Equal(t, http.StatusCreated, retry.status, retry.body)
	assert.False(t, retry.replayed(), "nothing was stored: the retry runs")
	assert.EqualValues(t, 2, h.runs.Load(), "handler runs")
	assert.Equal(t, 1, e.count("pay"), "the retry's effect committed")
}

func testTxServerError(t *testing.T, e *env, _ mode) {
	e.failThenRetry(t, "500", func(r reply) {
		assert.Equal(t, http.StatusInternalServerError, r.status, r.body)
	})
}

func testTxPanic(t *testing.T, e *env, _ mode) {
	e.failThenRetry(t, "panic", func(r reply) {
		assert.Error(t, r.err, "net/http drops the connection of a handler that panicked (got %d)", r.status)
	})
}

// A commit on a connection lost after the handler's effect answers 503
// commit-failed with Retry-After, not the handler's 201, and leaves
// nothing: the retry runs.
func testTxLostConn(t *testing.T, e *env, _ mode) {
	if e.h.LoseConn == nil {
		t.Skip("Harness.LoseConn is nil")
	}
	e.failThenRetry(t, "lose", func(r reply) {
		require.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
		assert.Equal(t, "commit-failed", problemName(t, r))
		assert.Equal(t, 1, retryAfter(t, r))
	})
}

// A handler that ends the transaction itself gets 500 commit-failed, no
// response is stored, and a retry runs the handler again (the effect the
// handler committed itself stays: the store cannot undo it).
func testTxEnded(t *testing.T, e *env, _ mode) {
	if e.h.EndTx == nil {
		t.Skip("Harness.EndTx is nil")
	}
	h := &txHandler{e: e}
	srv := e.txServer(e.store, h)
	r := txPost(t, srv, "k-end", "end")
	require.Equal(t, http.StatusInternalServerError, r.status, r.body)
	assert.Equal(t, "commit-failed", problemName(t, r))
	retry := txPost(t, srv, "k-end", "")
	require.Equal(t, http.StatusCreated, retry.status, retry.body)
	assert.False(t, retry.replayed(), "no response was stored: the retry runs")
	assert.EqualValues(t, 2, h.runs.Load(), "handler runs")
}

// 100 duplicates of one key, half on each of two nodes, at once: the
// handler runs once, its effect commits once, every 201 is the same bytes,
// and every other answer tells the client to retry (409, or 503 for a
// request that got no connection within the wait bound).
func testTxRace(t *testing.T, e *env, _ mode) {
	h := &txHandler{e: e}
	srvs := []*httptest.Server{e.txServer(e.store, h), e.txServer(e.node(), h)}
	const n = 100
	replies := make([]reply, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i] = txPost(t, srvs[i%2], "k-race", "")
		})
	}
	close(start)
	wg.Wait()
	created := ""
	for _, r := range replies {
		require.NoError(t, r.err)
		switch r.status {
		case http.StatusCreated:
			if created == "" {
				created = r.body
			}
			assert.Equal(t, created, r.body, "every 201 is the one run's response")
		case http.StatusConflict, http.StatusServiceUnavailable:
			assert.NotEmpty(t, r.header.Get(wire.HeaderRetryAfter), "a %d says when to retry", r.status)
		default:
			t.Errorf("a duplicate got %d %s", r.status, r.body)
		}
	}
	assert.NotEmpty(t, created, "one request ran")
	assert.EqualValues(t, 1, h.runs.Load(), "handler runs")
	assert.Equal(t, 1, e.count("pay"), "effects committed")
}
