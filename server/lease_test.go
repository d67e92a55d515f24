package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

// leaseServer serves c under the middleware in Leased mode on k's store.
func leaseServer(t *testing.T, k *kit, c *charge, hooks Hooks) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	cfg := Config{Mode: Leased, Lease: 30 * time.Second, Hooks: hooks}
	mux.Handle("POST /v1/charges", Middleware(k.store, quiet(cfg))(c))
	return serve(t, mux)
}

func TestCheckpointRejectsBadData(t *testing.T) {
	ls := &Lease{ops: &leasedAttempt{fence: memFence{m: NewMemoryStore()}}}
	for _, data := range []json.RawMessage{json.RawMessage(`{"a":`), make(json.RawMessage, maxRecoveryBytes+1)} {
		assert.ErrorIs(t, ls.Checkpoint(context.Background(), "p", data), ErrRecoveryData)
	}
}
