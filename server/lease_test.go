package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// charge is a Leased handler that calls a "gateway" (an effect outside the
// database). A first attempt records a recovery point and then does what
// act says; an attempt that took over reports what it recovered.
type charge struct {
	k    *kit
	runs atomic.Int64
	act  func(ctx context.Context, ls *Lease, w http.ResponseWriter) // nil: answer 201
}

func (c *charge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.runs.Add(1)
	ls, ok := LeaseFrom(r.Context())
	if !ok {
		http.Error(w, "no lease", http.StatusInternalServerError)
		return
	}
	if _, isTx := Tx(r.Context()); isTx {
		http.Error(w, "a Leased route has no transaction", http.StatusInternalServerError)
		return
	}
	if rec, took := ls.Recovery(); took {
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"attempt": ls.Attempt(), "point": rec.Point, "data": rec.Data})
		return
	}
	_ = c.k.effect(r.Context(), "gateway")
	if err := ls.Checkpoint(r.Context(), "charged", json.RawMessage(`{"charge": "ch_1"}`)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if c.act != nil {
		c.act(r.Context(), ls, w)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"attempt":%d}`, ls.Attempt())
}

func leaseServer(t *testing.T, k *kit, c *charge, hooks Hooks) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	cfg := Config{Mode: Leased, Lease: 30 * time.Second, Hooks: hooks}
	mux.Handle("POST /v1/charges", Middleware(k.store, quiet(cfg))(c))
	return serve(t, mux)
}

type recovered struct {
	Attempt int             `json:"attempt"`
	Point   string          `json:"point"`
	Data    json.RawMessage `json:"data"`
}

func decodeRecovered(t *testing.T, r reply) recovered {
	t.Helper()
	var got recovered
	require.NoError(t, json.Unmarshal([]byte(r.body), &got), "body %q", r.body)
	return got
}

func TestLeaseOwnerThatNeverCompletes(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		entered, stale := make(chan struct{}, 1), make(chan struct{})
		c := &charge{k: k, act: func(_ context.Context, _ *Lease, w http.ResponseWriter) {
			entered <- struct{}{}
			hold(t, stale) // the owner hangs past its lease
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"attempt":1}`))
		}}
		staleSeen := make(chan Event, 1)
		srv := leaseServer(t, k, c, Hooks{StaleCompletion: func(_ context.Context, e Event) { staleSeen <- e }})

		owner := make(chan reply)
		go func() { owner <- post(t, srv, "/v1/charges", "k-lease", "{}") }()
		recv(t, entered)

		k.clock.Advance(10 * time.Second)
		busy := post(t, srv, "/v1/charges", "k-lease", "{}")
		require.Equal(t, http.StatusConflict, busy.status, busy.body)
		assert.Equal(t, wire.ProblemKeyInFlight, problemName(t, busy))
		assert.InDelta(t, 20, retryAfter(t, busy), 1, "Retry-After is the lease's remaining time")

		k.clock.Advance(21 * time.Second)
		took := post(t, srv, "/v1/charges", "k-lease", "{}")
		require.Equal(t, http.StatusCreated, took.status, took.body)
		got := decodeRecovered(t, took)
		assert.Equal(t, 2, got.Attempt)
		assert.Equal(t, "charged", got.Point)
		assert.JSONEq(t, `{"charge":"ch_1"}`, string(got.Data))

		close(stale)
		late := recv(t, owner)
		assert.Equal(t, http.StatusConflict, late.status, "the stale owner's client must not get its 201: %s", late.body)
		assert.Equal(t, wire.ProblemKeyInFlight, problemName(t, late))
		e := recv(t, staleSeen)
		assert.Equal(t, 1, e.Attempt)
		assert.ErrorIs(t, e.Err, ErrLeaseLost)

		final := post(t, srv, "/v1/charges", "k-lease", "{}")
		assert.True(t, final.replayed())
		assert.Equal(t, took.body, final.body, "the new owner's result is the stored one")
		assert.EqualValues(t, 2, c.runs.Load())
		assert.Equal(t, 1, k.count(t, "gateway"), "the takeover reconciled instead of charging again")
	})
}

func TestLeaseFailureHandsOverAtOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		c := &charge{k: k, act: func(_ context.Context, _ *Lease, w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadGateway)
		}}
		srv := leaseServer(t, k, c, Hooks{})
		assert.Equal(t, http.StatusBadGateway, post(t, srv, "/v1/charges", "k-502", "{}").status)
		retry := post(t, srv, "/v1/charges", "k-502", "{}")
		require.Equal(t, http.StatusCreated, retry.status, "no 409: the failed attempt ended its lease: %s", retry.body)
		got := decodeRecovered(t, retry)
		assert.Equal(t, 2, got.Attempt)
		assert.Equal(t, "charged", got.Point, "the next attempt learns how far the failed one got")
	})
}

func TestLeasePanicHandsOver(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		c := &charge{k: k, act: func(context.Context, *Lease, http.ResponseWriter) { panic("gateway client bug") }}
		srv := leaseServer(t, k, c, Hooks{})
		assert.Error(t, post(t, srv, "/v1/charges", "k-panic", "{}").err)
		retry := post(t, srv, "/v1/charges", "k-panic", "{}")
		require.Equal(t, http.StatusCreated, retry.status, retry.body)
		assert.Equal(t, "charged", decodeRecovered(t, retry).Point)
	})
}

func TestLeaseRejectionReleasesTheKey(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		var runs atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			ls, _ := LeaseFrom(r.Context())
			if r.ContentLength < 5 {
				w.WriteHeader(http.StatusBadRequest) // refused before acting: no recovery point
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, "attempt %d", ls.Attempt())
		})
		mux := http.NewServeMux()
		mux.Handle("POST /v1/charges", Middleware(k.store, quiet(Config{Mode: Leased}))(h))
		srv := serve(t, mux)
		assert.Equal(t, http.StatusBadRequest, post(t, srv, "/v1/charges", "k-rej", "{}").status)
		fixed := post(t, srv, "/v1/charges", "k-rej", `{"amount": 1}`)
		assert.Equal(t, http.StatusCreated, fixed.status, "not 422: the refused request stored nothing")
		assert.Equal(t, "attempt 1", fixed.body, "a fresh first attempt, not a takeover")
	})
}

func TestLeaseExtend(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		lateErr := make(chan error, 1)
		c := &charge{k: k, act: func(ctx context.Context, ls *Lease, w http.ResponseWriter) {
			if err := ls.Extend(ctx, 2*time.Minute); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			entered <- struct{}{}
			hold(t, release)
			lateErr <- errors.Join(ls.Extend(ctx, 0), ls.Checkpoint(ctx, "late", nil))
			w.WriteHeader(http.StatusCreated)
		}}
		srv := leaseServer(t, k, c, Hooks{})
		owner := make(chan reply)
		go func() { owner <- post(t, srv, "/v1/charges", "k-ext", "{}") }()
		recv(t, entered)

		k.clock.Advance(time.Minute)
		busy := post(t, srv, "/v1/charges", "k-ext", "{}")
		assert.Equal(t, http.StatusConflict, busy.status, "the extended lease is still live")
		assert.InDelta(t, 60, retryAfter(t, busy), 1)

		k.clock.Advance(61 * time.Second)
		assert.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", "k-ext", "{}").status, "takeover")
		close(release)
		err := recv(t, lateErr)
		assert.ErrorIs(t, err, ErrLeaseLost, "a stale owner can neither extend nor checkpoint")
		assert.Equal(t, http.StatusConflict, recv(t, owner).status)
	})
}

func TestCheckpointRejectsBadData(t *testing.T) {
	ls := &Lease{ops: &leasedAttempt{fence: memFence{m: NewMemoryStore()}}}
	for _, data := range []json.RawMessage{json.RawMessage(`{"a":`), make(json.RawMessage, MaxRecoveryBytes+1)} {
		assert.ErrorIs(t, ls.Checkpoint(context.Background(), "p", data), ErrRecoveryData)
	}
}
