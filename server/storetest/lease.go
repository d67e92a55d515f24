package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

var onlyLeased = []mode{leased}

var leaseAreas = []area{
	{"LeaseOwnerThatNeverCompletes", onlyLeased, testLeaseOwnerThatNeverCompletes},
	{"LeaseFailureHandsOverAtOnce", onlyLeased, testLeaseFailureHandsOver},
	{"LeaseRejectionReleasesTheKey", onlyLeased, testLeaseRejectionReleases},
	{"LeaseExtend", onlyLeased, testLeaseExtend},
	{"TakeoverExtendsTheExpiry", onlyLeased, testTakeoverExtendsTheExpiry},
	{"ExtendKeepsTheRecordPastTheLease", onlyLeased, testExtendKeepsTheRecord},
	{"LiveLeaseIsNeverExpired", onlyLeased, testLiveLeaseIsNeverExpired},
	{"StaleWritesChangeNothing", onlyLeased, testStaleWritesChangeNothing},
	{"RecoveryPoints", onlyLeased, testRecoveryPoints},
}

// charge is a Leased handler that calls a "gateway" (an effect outside
// any database). A first attempt records a recovery point and then does
// what act says; an attempt that took over reports what it recovered.
type charge struct {
	e    *env
	runs atomic.Int64
	act  func(ctx context.Context, ls *server.Lease, w http.ResponseWriter) // nil: answer 201
}

func (c *charge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.runs.Add(1)
	ls, ok := server.LeaseFrom(r.Context())
	if !ok {
		http.Error(w, "no lease", http.StatusInternalServerError)
		return
	}
	if rec, took := ls.Recovery(); took {
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"attempt": ls.Attempt(), "point": rec.Point, "data": rec.Data})
		return
	}
	_ = c.e.effect(r.Context(), "gateway")
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

func (e *env) leaseServer(c *charge, cfg server.Config) *http.ServeMux {
	mux := http.NewServeMux()
	e.mount(mux, "POST /v1/charges", leased, cfg, c)
	return mux
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

func testLeaseOwnerThatNeverCompletes(t *testing.T, e *env, _ mode) {
	entered, stale := make(chan struct{}, 1), make(chan struct{})
	c := &charge{e: e, act: func(_ context.Context, _ *server.Lease, w http.ResponseWriter) {
		entered <- struct{}{}
		hold(t, stale) // the owner hangs past its lease
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"attempt":1}`))
	}}
	staleSeen := make(chan server.Event, 1)
	srv := serve(t, e.leaseServer(c, server.Config{Lease: 30 * time.Second,
		Hooks: server.Hooks{StaleCompletion: func(_ context.Context, ev server.Event) { staleSeen <- ev }}}))

	owner := make(chan reply)
	go func() { owner <- post(t, srv, "/v1/charges", "k-lease", "{}") }()
	recv(t, entered)
	e.clock.Advance(10 * time.Second)
	busy := post(t, srv, "/v1/charges", "k-lease", "{}")
	require.Equal(t, http.StatusConflict, busy.status, busy.body)
	assert.Equal(t, wire.ProblemKeyInFlight, problemName(t, busy))
	assert.InDelta(t, 20, retryAfter(t, busy), 1, "Retry-After is the lease's remaining time")

	e.clock.Advance(21 * time.Second)
	took := post(t, srv, "/v1/charges", "k-lease", "{}")
	require.Equal(t, http.StatusCreated, took.status, took.body)
	got := decodeRecovered(t, took)
	assert.Equal(t, 2, got.Attempt)
	assert.Equal(t, "charged", got.Point)
	assert.JSONEq(t, `{"charge":"ch_1"}`, string(got.Data))

	close(stale)
	late := recv(t, owner)
	assert.Equal(t, http.StatusConflict, late.status, "the stale owner's client must not get its 201: %s", late.body)
	ev := recv(t, staleSeen)
	assert.Equal(t, 1, ev.Attempt)
	assert.ErrorIs(t, ev.Err, server.ErrLeaseLost)
	final := post(t, srv, "/v1/charges", "k-lease", "{}")
	assert.True(t, final.replayed())
	assert.Equal(t, took.body, final.body, "the new owner's result is the stored one")
	assert.EqualValues(t, 2, c.runs.Load())
	assert.Equal(t, 1, e.count("gateway"), "the takeover reconciled instead of charging again")
}

// A 502 or a panic ends the lease at once: the retry takes over with the
// recovery point, no 409.
func testLeaseFailureHandsOver(t *testing.T, e *env, _ mode) {
	for name, act := range map[string]func(context.Context, *server.Lease, http.ResponseWriter){
		"502":   func(_ context.Context, _ *server.Lease, w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) },
		"panic": func(context.Context, *server.Lease, http.ResponseWriter) { panic("gateway client bug") },
	} {
		srv := serve(t, e.leaseServer(&charge{e: e, act: act}, server.Config{}))
		key := "k-hand-" + name
		first := post(t, srv, "/v1/charges", key, "{}")
		assert.True(t, first.err != nil || first.status == http.StatusBadGateway, "%s: %d %v", name, first.status, first.err)
		retry := post(t, srv, "/v1/charges", key, "{}")
		require.Equal(t, http.StatusCreated, retry.status, "%s: the failed attempt ended its lease: %s", name, retry.body)
		got := decodeRecovered(t, retry)
		assert.Equal(t, 2, got.Attempt, name)
		assert.Equal(t, "charged", got.Point, "%s: the next attempt learns how far the failed one got", name)
	}
}

func testLeaseRejectionReleases(t *testing.T, e *env, _ mode) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls, _ := server.LeaseFrom(r.Context())
		if r.ContentLength < 5 {
			w.WriteHeader(http.StatusBadRequest) // refused before acting: no recovery point
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, "attempt %d", ls.Attempt())
	})
	mux := http.NewServeMux()
	e.mount(mux, "POST /v1/charges", leased, server.Config{}, h)
	srv := serve(t, mux)
	assert.Equal(t, http.StatusBadRequest, post(t, srv, "/v1/charges", "k-rej", "{}").status)
	fixed := post(t, srv, "/v1/charges", "k-rej", `{"amount": 1}`)
	assert.Equal(t, http.StatusCreated, fixed.status, "not 422: the refused request stored nothing")
	assert.Equal(t, "attempt 1", fixed.body, "a fresh first attempt, not a takeover")
}

func testLeaseExtend(t *testing.T, e *env, _ mode) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	lateErr := make(chan error, 1)
	c := &charge{e: e, act: func(ctx context.Context, ls *server.Lease, w http.ResponseWriter) {
		if err := ls.Extend(ctx, 2*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		entered <- struct{}{}
		hold(t, release)
		lateErr <- errors.Join(ls.Extend(ctx, 0), ls.Checkpoint(ctx, "late", nil))
		w.WriteHeader(http.StatusCreated)
	}}
	srv := serve(t, e.leaseServer(c, server.Config{Lease: 30 * time.Second}))
	owner := make(chan reply)
	go func() { owner <- post(t, srv, "/v1/charges", "k-ext", "{}") }()
	recv(t, entered)
	e.clock.Advance(time.Minute)
	busy := post(t, srv, "/v1/charges", "k-ext", "{}")
	assert.Equal(t, http.StatusConflict, busy.status, "the extended lease is still live")
	assert.InDelta(t, 60, retryAfter(t, busy), 1)
	e.clock.Advance(61 * time.Second)
	assert.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", "k-ext", "{}").status, "takeover")
	close(release)
	assert.ErrorIs(t, recv(t, lateErr), server.ErrLeaseLost, "a stale owner can neither extend nor checkpoint")
	assert.Equal(t, http.StatusConflict, recv(t, owner).status)
}

// failingCharge acts (one "gateway" effect and the recovery point
// "charged") on a first attempt, and answers 502 on its first fails
// attempts; a later attempt answers 201 with what it recovered.
type failingCharge struct {
	e     *env
	fails int
	runs  atomic.Int64
}

func (c *failingCharge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(c.runs.Add(1))
	ls, _ := server.LeaseFrom(r.Context())
	rec, took := ls.Recovery()
	if !took {
		_ = c.e.effect(r.Context(), "gateway")
		_ = ls.Checkpoint(r.Context(), "charged", nil)
	}
	if n <= c.fails {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"attempt":%d,"point":%q}`, ls.Attempt(), rec.Point)
}

// A takeover makes the record answer for a full retention from then.
func testTakeoverExtendsTheExpiry(t *testing.T, e *env, _ mode) {
	mux := http.NewServeMux()
	e.mount(mux, "POST /v1/charges", leased, server.Config{Lease: 30 * time.Second, Retention: time.Minute},
		&failingCharge{e: e, fails: 2})
	srv := serve(t, mux)
	require.Equal(t, http.StatusBadGateway, post(t, srv, "/v1/charges", "k-ext", "{}").status)
	e.clock.Advance(50 * time.Second)
	require.Equal(t, http.StatusBadGateway, post(t, srv, "/v1/charges", "k-ext", "{}").status, "a takeover that fails too")
	e.clock.Advance(20 * time.Second) // past the first claim's retention
	last := post(t, srv, "/v1/charges", "k-ext", "{}")
	require.Equal(t, http.StatusCreated, last.status, last.body)
	assert.JSONEq(t, `{"attempt":3,"point":"charged"}`, last.body, "taken over, not run afresh")
	assert.Equal(t, 1, e.count("gateway"))
}

// An extension keeps the record at least one lease past the lease's end,
// even past its retention.
func testExtendKeepsTheRecord(t *testing.T, e *env, _ mode) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var acts atomic.Int64
	c := &charge{e: e, act: func(ctx context.Context, ls *server.Lease, w http.ResponseWriter) {
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
	srv := serve(t, e.leaseServer(c, server.Config{Lease: 30 * time.Second, Retention: time.Minute}))
	owner := make(chan reply)
	go func() { owner <- post(t, srv, "/v1/charges", "k-hang", "{}") }()
	recv(t, entered)
	e.clock.Advance(5*time.Minute + 10*time.Second) // past the lease and the retention
	took := post(t, srv, "/v1/charges", "k-hang", "{}")
	require.Equal(t, http.StatusCreated, took.status, took.body)
	got := decodeRecovered(t, took)
	assert.Equal(t, 2, got.Attempt, "taken over, not run afresh")
	assert.Equal(t, "charged", got.Point)
	close(release)
	assert.Equal(t, http.StatusConflict, recv(t, owner).status, "the stale owner's completion is refused")
}

// A record whose lease is live is never treated as expired or swept,
// whatever its retention says.
func testLiveLeaseIsNeverExpired(t *testing.T, e *env, _ mode) {
	ctx := context.Background()
	first := e.claimed(leasedClaim("k-live", 10*time.Second, time.Second, 1))
	e.clock.Advance(1500 * time.Millisecond) // past the retention, inside the lease
	dup := e.claim(leasedClaim("k-live", 10*time.Second, time.Second, 1))
	assert.Equal(t, server.VerdictInFlight, dup.Verdict, "a duplicate must not run beside an attempt whose lease is live")
	assert.InDelta(t, 8500*time.Millisecond, dup.RetryAfter, float64(time.Second), "RetryAfter is the lease left")
	deleted, err := e.store.Sweep(ctx, 10)
	require.NoError(t, err)
	assert.Zero(t, deleted, "a sweep keeps a record whose lease is live")
	require.NoError(t, first.Checkpoint(ctx, "charged", []byte(`{"n":1}`)), "the first attempt still owns the key")
	require.NoError(t, first.Complete(ctx, created(`{"n":1}`)))
}

// Once another attempt has taken the key over, every write of the stale
// one returns ErrLeaseLost and changes nothing.
func testStaleWritesChangeNothing(t *testing.T, e *env, _ mode) {
	ctx := context.Background()
	c := leasedClaim("k-stale", 30*time.Second, time.Hour, 1)
	stale := e.claimed(c)
	assert.Equal(t, 1, stale.Number())
	_, took := stale.Recovery()
	assert.False(t, took, "a first attempt recovers nothing")
	require.NoError(t, stale.Checkpoint(ctx, "p1", []byte(`{"step":1}`)))
	e.clock.Advance(31 * time.Second)
	owner := e.claimed(c)
	assert.Equal(t, 2, owner.Number(), "a takeover's attempt number")
	rec, took := owner.Recovery()
	require.True(t, took)
	assert.Equal(t, "p1", rec.Point)
	assert.JSONEq(t, `{"step":1}`, string(rec.Data))

	for name, err := range map[string]error{
		"Extend":     stale.Extend(ctx, time.Hour, time.Hour),
		"Checkpoint": stale.Checkpoint(ctx, "p2", nil),
		"Complete":   stale.Complete(ctx, created(`{"by":"stale"}`)),
		"Abort":      stale.Abort(ctx, true),
	} {
		assert.ErrorIs(t, err, server.ErrLeaseLost, "the stale attempt's %s", name)
	}
	busy := e.claim(c)
	require.Equal(t, server.VerdictInFlight, busy.Verdict, "the new owner's lease is untouched")
	assert.InDelta(t, 30*time.Second, busy.RetryAfter, float64(2*time.Second))
	require.NoError(t, owner.Complete(ctx, created(`{"by":"owner"}`)))
	res := e.claim(c)
	require.Equal(t, server.VerdictReplay, res.Verdict)
	assert.Equal(t, `{"by":"owner"}`, string(res.Response.Body))
	assert.Equal(t, []string{"application/json"}, res.Response.Header["Content-Type"])
	assert.Equal(t, server.VerdictMismatch, e.claim(leasedClaim("k-stale", 30*time.Second, time.Hour, 2)).Verdict,
		"another digest under the key")
	assert.ErrorIs(t, owner.Complete(ctx, created(`{"by":"owner again"}`)), server.ErrLeaseLost, "a completed record is never written again")
}

// Recovery points: the last one wins, nil data is none, a point of ""
// counts as recorded (a refused first attempt keeps its record), and a
// first attempt that recorded none is released by a refusal.
func testRecoveryPoints(t *testing.T, e *env, _ mode) {
	ctx := context.Background()
	a := e.claimed(leasedClaim("k-points", 30*time.Second, time.Hour, 1))
	require.NoError(t, a.Checkpoint(ctx, "first", []byte(`{"a":1}`)))
	require.NoError(t, a.Checkpoint(ctx, "second", nil))
	require.NoError(t, a.Abort(ctx, false))
	b := e.claimed(leasedClaim("k-points", 30*time.Second, time.Hour, 1))
	rec, took := b.Recovery()
	require.True(t, took, "the lease ended at once: taken over")
	assert.Equal(t, server.Recovery{Point: "second"}, rec)

	empty := e.claimed(leasedClaim("k-empty", 30*time.Second, time.Hour, 1))
	require.NoError(t, empty.Checkpoint(ctx, "", nil))
	require.NoError(t, empty.Abort(ctx, true))
	again := e.claimed(leasedClaim("k-empty", 30*time.Second, time.Hour, 1))
	assert.Equal(t, 2, again.Number(), "a point recorded, even \"\", keeps the record")

	none := e.claimed(leasedClaim("k-none", 30*time.Second, time.Hour, 1))
	require.NoError(t, none.Abort(ctx, true))
	fresh := e.claimed(leasedClaim("k-none", 30*time.Second, time.Hour, 2))
	assert.Equal(t, 1, fresh.Number(), "the refused first attempt released the key: another digest claims it afresh")
}
