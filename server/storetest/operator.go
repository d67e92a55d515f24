package storetest

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// operatorAreas check the optional [server.RecordStore] through a
// [server.Operator], as idemctl and the admin page use it. They run when
// the store implements it.
var operatorAreas = []area{
	{"OperatorLooksUpARecord", onlyLeased, testOperatorLookup},
	{"OperatorFindsAKeyInEveryScope", onlyLeased, testOperatorFindsKey},
	{"OperatorListsAndEvictsAStuckLease", onlyLeased, testOperatorStuck},
	{"OperatorEvictRefusesALiveLease", onlyLeased, testOperatorLiveLease},
	{"OperatorCountsExactly", onlyLeased, testOperatorCounts},
	{"OperatorLooksUpAReference", onlyLeased, testOperatorLookupRef},
}

// operator is an Operator over e's store, which must be a RecordStore.
func (e *env) operator() *server.Operator {
	rs, ok := e.store.(server.RecordStore)
	require.True(e.t, ok, "the store implements server.RecordStore")
	return server.NewOperator(rs, server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)})
}

// chargeOp names the record of key on leaseServer's route.
func chargeOp(key string) server.Operation {
	return server.Operation{Route: "POST /v1/charges", Key: key}
}

func testOperatorLookup(t *testing.T, e *env, _ mode) {
	srv := serve(t, e.leaseServer(&charge{e: e}, server.Config{}))
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", "k-look", `{"amount":5}`).status)
	ops, ctx := e.operator(), context.Background()

	rec, err := ops.Lookup(ctx, chargeOp("k-look"), false)
	require.NoError(t, err)
	assert.Equal(t, "done", rec.State)
	assert.Equal(t, server.Leased, rec.Mode)
	assert.Equal(t, http.StatusCreated, rec.Status)
	assert.Equal(t, 1, rec.Attempt)
	assert.False(t, rec.Stuck())
	assert.False(t, rec.Expired())
	require.NotNil(t, rec.Recovery)
	assert.Equal(t, "charged", rec.Recovery.Point)
	assert.Nil(t, rec.Body, "no payload unless asked")

	full, err := ops.Lookup(ctx, chargeOp("k-look"), true)
	require.NoError(t, err)
	assert.JSONEq(t, `{"attempt":1}`, string(full.Body))
	require.NotNil(t, full.Request, "a Leased record keeps its request")
	assert.Equal(t, "POST", full.Request.Method)
	assert.JSONEq(t, `{"amount":5}`, string(full.Request.Body))

	_, err = ops.Lookup(ctx, chargeOp("k-none"), false)
	assert.ErrorIs(t, err, server.ErrUnknownKey)
	_, err = ops.Lookup(ctx, server.Operation{Route: "POST /v1/refunds", Key: "k-look"}, false)
	assert.ErrorIs(t, err, server.ErrUnknownKey, "another route is another scope")
}

// testOperatorLookupRef looks a record up by the reference its answer
// carried; it skips a store that is not a [server.RefReader] (optional).
func testOperatorLookupRef(t *testing.T, e *env, _ mode) {
	if _, ok := e.store.(server.RefReader); !ok {
		t.Skip("the store does not implement server.RefReader: no lookup by operation reference")
	}
	srv := serve(t, e.leaseServer(&charge{e: e}, server.Config{}))
	first := post(t, srv, "/v1/charges", "k-ref", `{"amount":7}`)
	require.Equal(t, http.StatusCreated, first.status)
	ref := first.header.Get("Idempotency-Operation-Ref")
	require.Equal(t, server.OperationRef("", "", "POST /v1/charges", "k-ref"), ref, "the answer's reference")
	ops, ctx := e.operator(), context.Background()

	rec, err := ops.LookupRef(ctx, strings.ToUpper(ref), true)
	require.NoError(t, err)
	assert.Equal(t, chargeOp("k-ref").Key, rec.Key)
	assert.Equal(t, "POST /v1/charges", rec.Route)
	assert.Equal(t, "done", rec.State)
	assert.JSONEq(t, `{"attempt":1}`, string(rec.Body), "the payload, when asked")

	_, err = ops.LookupRef(ctx, server.OperationRef("", "", "POST /v1/charges", "k-none"), false)
	assert.ErrorIs(t, err, server.ErrUnknownKey)
	_, err = ops.LookupRef(ctx, "k-ref", false)
	assert.ErrorIs(t, err, server.ErrBadScope, "a key is not a reference")
}

func testOperatorFindsKey(t *testing.T, e *env, _ mode) {
	mux := http.NewServeMux()
	cfg := server.Config{Scope: func(r *http.Request) (string, string) { return "acme", r.Header.Get("X-User") }}
	e.mount(mux, "POST /v1/charges", leased, cfg, &charge{e: e})
	e.mount(mux, "POST /v1/refunds", leased, cfg, &charge{e: e})
	srv := serve(t, mux)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", "k-shared", "{}", "X-User", "ann").status)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/refunds", "k-shared", "{}", "X-User", "ann").status)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", "k-shared", "{}", "X-User", "bob").status)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", "k-other", "{}", "X-User", "ann").status)

	recs, err := e.operator().LookupKey(context.Background(), "k-shared")
	require.NoError(t, err)
	var scopes []string
	for _, r := range recs {
		assert.Equal(t, "k-shared", r.Key)
		assert.Equal(t, "acme", r.Tenant)
		assert.Equal(t, "done", r.State)
		scopes = append(scopes, r.Principal+" "+r.Route)
	}
	assert.ElementsMatch(t, []string{"ann POST /v1/charges", "ann POST /v1/refunds", "bob POST /v1/charges"}, scopes)

	none, err := e.operator().LookupKey(context.Background(), "k-never")
	require.NoError(t, err, "a key no scope holds is no error")
	assert.Empty(t, none)
	_, err = e.operator().LookupKey(context.Background(), "")
	assert.ErrorIs(t, err, server.ErrBadScope)
}

func testOperatorStuck(t *testing.T, e *env, _ mode) {
	fail := &charge{e: e, act: func(_ context.Context, _ *server.Lease, w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }}
	failing := serve(t, e.leaseServer(fail, server.Config{}))
	require.Equal(t, http.StatusBadGateway, post(t, failing, "/v1/charges", "k-stuck", "{}").status)
	ops, ctx := e.operator(), context.Background()

	page, err := ops.InFlight(ctx, server.InFlightQuery{Stuck: true})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	stuck := page.Records[0]
	assert.Equal(t, "k-stuck", stuck.Key)
	assert.Equal(t, "running", stuck.State)
	assert.True(t, stuck.Stuck(), "the 502 ended the lease")
	require.NotNil(t, stuck.Recovery)
	assert.Equal(t, "charged", stuck.Recovery.Point)
	other, err := ops.InFlight(ctx, server.InFlightQuery{Route: "POST /v1/refunds"})
	require.NoError(t, err)
	assert.Empty(t, other.Records, "another route's list")

	gone, err := ops.Evict(ctx, chargeOp("k-stuck"), false)
	require.NoError(t, err, "a stuck lease needs no force")
	assert.Equal(t, "running", gone.State)
	_, err = ops.Lookup(ctx, chargeOp("k-stuck"), false)
	assert.ErrorIs(t, err, server.ErrUnknownKey)
	_, err = ops.Evict(ctx, chargeOp("k-stuck"), false)
	assert.ErrorIs(t, err, server.ErrUnknownKey)
	srv := serve(t, e.leaseServer(&charge{e: e}, server.Config{}))
	again := post(t, srv, "/v1/charges", "k-stuck", "{}")
	require.Equal(t, http.StatusCreated, again.status, again.body)
	assert.JSONEq(t, `{"attempt":1}`, again.body, "after eviction the key runs as a first request")
}

func testOperatorLiveLease(t *testing.T, e *env, _ mode) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	c := &charge{e: e, act: func(_ context.Context, _ *server.Lease, w http.ResponseWriter) {
		entered <- struct{}{}
		hold(t, release)
		w.WriteHeader(http.StatusCreated)
	}}
	srv := serve(t, e.leaseServer(c, server.Config{}))
	owner := make(chan reply)
	go func() { owner <- post(t, srv, "/v1/charges", "k-live", "{}") }()
	recv(t, entered)
	ops, ctx := e.operator(), context.Background()

	rec, err := ops.Evict(ctx, chargeOp("k-live"), false)
	assert.ErrorIs(t, err, server.ErrLeaseLive)
	assert.Greater(t, rec.LeaseLeft().Seconds(), 0.0, "the refusal tells the lease left")
	kept, err := ops.Lookup(ctx, chargeOp("k-live"), false)
	require.NoError(t, err, "a refused eviction deletes nothing")
	assert.Equal(t, "running", kept.State)
	page, err := ops.InFlight(ctx, server.InFlightQuery{})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	assert.False(t, page.Records[0].Stuck())
	stuck, err := ops.InFlight(ctx, server.InFlightQuery{Stuck: true})
	require.NoError(t, err)
	assert.Empty(t, stuck.Records, "a live lease is not stuck")

	_, err = ops.Evict(ctx, chargeOp("k-live"), true)
	require.NoError(t, err, "force evicts a live lease")
	close(release)
	assert.Equal(t, http.StatusConflict, recv(t, owner).status, "the evicted attempt's completion is refused (lease lost)")
	_, err = ops.Lookup(ctx, chargeOp("k-live"), false)
	assert.ErrorIs(t, err, server.ErrUnknownKey, "the refused completion stored nothing")
}

func testOperatorCounts(t *testing.T, e *env, _ mode) {
	ops, ctx := e.operator(), context.Background()
	empty, err := ops.Counts(ctx)
	require.NoError(t, err)
	assert.Zero(t, empty.Records)
	assert.Contains(t, []server.CountKind{"", server.CountExact}, empty.RecordsAre)

	srv := serve(t, e.leaseServer(&charge{e: e}, server.Config{}))
	for _, key := range []string{"k-c1", "k-c2", "k-c3"} {
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", key, "{}").status)
	}
	fail := &charge{e: e, act: func(_ context.Context, _ *server.Lease, w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }}
	require.Equal(t, http.StatusBadGateway, post(t, serve(t, e.leaseServer(fail, server.Config{})), "/v1/charges", "k-c4", "{}").status)

	c, err := ops.Counts(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 4, c.Records, "a small store's count is exact (%s)", c.RecordsAre)
	assert.Contains(t, []server.CountKind{"", server.CountExact}, c.RecordsAre)
	assert.Equal(t, 1, c.Running)
	assert.Equal(t, 1, c.Stuck)
}
