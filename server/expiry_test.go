package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of this file hold a record's retention and its lease apart: a
// record whose lease is live is never expired, and a takeover or an
// Extend keeps the record alive past the lease, so that a retry after the
// lease ended takes the operation over with its recovery point instead of
// running it afresh beside (or after) the attempt that may have acted.

func TestLeasedConfigNeedsRetentionOfTwoLeases(t *testing.T) {
	assert.PanicsWithValue(t, "server: Config.Retention (1s) must be at least twice Config.Lease (10s) in Leased mode: "+
		"a retry after a lease ended must still find the record and its recovery point", func() {
		Middleware(nil, Config{Mode: Leased, Lease: 10 * time.Second, Retention: time.Second})
	})
	assert.Panics(t, func() { Middleware(nil, Config{Mode: Leased, Lease: time.Hour, Retention: time.Hour}) })
	assert.Panics(t, func() { Middleware(nil, Config{Mode: Leased, Lease: 13 * time.Hour}) }, "the default retention, 24 h")
	assert.NotPanics(t, func() { Middleware(nil, Config{Mode: Leased, Lease: 10 * time.Second, Retention: 20 * time.Second}) })
	assert.NotPanics(t, func() { Middleware(nil, Config{Lease: 10 * time.Second, Retention: time.Second}) },
		"a Transactional route has no lease")
}

// leasedClaim claims key in Leased mode at the store level, with a lease
// and a retention that Middleware would refuse: the records of an older
// version, or written by hand, may have them.
func leasedClaim(t *testing.T, k *kit, key string, lease, retention time.Duration) ClaimResult {
	t.Helper()
	in := &fpInput{method: http.MethodPost, route: "POST /v1/charges", body: []byte("{}")}
	r := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader("{}"))
	r.Pattern = in.route
	c := &Claim{Scope: scopeHash("", "", in.route, key), Route: in.route, Key: key, Digest: fingerprint(in), DigestAlg: fingerprintAlg,
		in: in, Mode: Leased, Lease: lease, Retention: retention, Wait: time.Second, Request: encodeRequest(r, nil, in.body)}
	res, err := k.store.Claim(context.Background(), c)
	require.NoError(t, err)
	return res
}

func TestLiveLeaseIsNeverExpired(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		first := leasedClaim(t, k, "k-live", 10*time.Second, time.Second)
		require.Equal(t, VerdictClaimed, first.Verdict)
		k.clock.Advance(1500 * time.Millisecond) // past the retention, inside the lease

		dup := leasedClaim(t, k, "k-live", 10*time.Second, time.Second)
		assert.Equal(t, VerdictInFlight, dup.Verdict, "a duplicate must not run beside an attempt whose lease is live")
		deleted, err := k.store.Sweep(context.Background(), 10)
		require.NoError(t, err)
		assert.Zero(t, deleted, "a sweep keeps a record whose lease is live")

		require.NoError(t, first.Attempt.(LeasedAttempt).Checkpoint(context.Background(), "charged", json.RawMessage(`{"n":1}`)),
			"the first attempt still owns the key and its recovery data")
		require.NoError(t, first.Attempt.Complete(context.Background(), &Response{Status: 201}))
	})
}

// failingCharge acts (one "gateway" effect and the recovery point
// "charged") on a first attempt, and answers 502 on its first fails
// attempts; a later attempt answers 201 with what it recovered.
type failingCharge struct {
	k     *kit
	fails int
	runs  atomic.Int64
}

func (c *failingCharge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(c.runs.Add(1))
	ls, _ := LeaseFrom(r.Context())
	rec, took := ls.Recovery()
	if !took {
		_ = c.k.effect(r.Context(), "gateway")
		_ = ls.Checkpoint(r.Context(), "charged", nil)
	}
	if n <= c.fails {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"attempt":%d,"point":%q}`, ls.Attempt(), rec.Point)
}

func TestTakeoverExtendsTheExpiry(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		c := &failingCharge{k: k, fails: 2}
		mux := http.NewServeMux()
		mux.Handle("POST /v1/charges", Middleware(k.store, quiet(Config{Mode: Leased, Lease: 30 * time.Second, Retention: time.Minute}))(c))
		srv := serve(t, mux)

		require.Equal(t, http.StatusBadGateway, post(t, srv, "/v1/charges", "k-ext", "{}").status)
		k.clock.Advance(50 * time.Second)
		require.Equal(t, http.StatusBadGateway, post(t, srv, "/v1/charges", "k-ext", "{}").status, "a takeover that fails too")
		k.clock.Advance(20 * time.Second) // past the first claim's retention

		last := post(t, srv, "/v1/charges", "k-ext", "{}")
		require.Equal(t, http.StatusCreated, last.status, last.body)
		assert.JSONEq(t, `{"attempt":3,"point":"charged"}`, last.body, "taken over, not run afresh")
		assert.Equal(t, 1, k.count(t, "gateway"))
	})
}

func TestExtendKeepsTheRecordPastTheLease(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		var acts atomic.Int64
		c := &charge{k: k, act: func(ctx context.Context, ls *Lease, w http.ResponseWriter) {
			if acts.Add(1) > 1 { // run afresh: the failure this test looks for
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"attempt":1}`))
				return
			}
			if err := ls.Extend(ctx, 5*time.Minute); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			entered <- struct{}{}
			hold(t, release) // the node hangs, then its lease runs out
			w.WriteHeader(http.StatusCreated)
		}}
		mux := http.NewServeMux()
		mux.Handle("POST /v1/charges", Middleware(k.store, quiet(Config{Mode: Leased, Lease: 30 * time.Second, Retention: time.Minute}))(c))
		srv := serve(t, mux)
		owner := make(chan reply)
		go func() { owner <- post(t, srv, "/v1/charges", "k-hang", "{}") }()
		recv(t, entered)

		k.clock.Advance(5*time.Minute + 10*time.Second) // past the lease and the retention
		took := post(t, srv, "/v1/charges", "k-hang", "{}")
		require.Equal(t, http.StatusCreated, took.status, took.body)
		got := decodeRecovered(t, took)
		assert.Equal(t, 2, got.Attempt, "taken over, not run afresh")
		assert.Equal(t, "charged", got.Point)
		assert.Equal(t, 1, k.count(t, "gateway"))
		close(release)
		assert.Equal(t, http.StatusConflict, recv(t, owner).status, "the stale owner's completion is refused")
	})
}
