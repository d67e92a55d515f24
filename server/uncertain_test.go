package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

var acmeAlice = Operation{Tenant: "acme", Principal: "alice", Route: reconciledRoute}

func TestReconcileLeavesUncertainAtMaxAge(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		h := &abandoning{k: k}
		srv := abandoningServer(t, k, h)
		for _, key := range []string{"k-applied", "k-not-applied"} {
			require.Equal(t, http.StatusBadGateway, post(t, srv, "/v1/accounts/a-1/charges", key, `{}`).status)
		}
		parked := make(chan ReconcileEvent, 2)
		rc := testReconciler(t, k, ReconcileConfig{Interval: time.Minute, MaxAge: 10 * time.Minute,
			Routes: answer(Settlement{}), Hooks: ReconcileHooks{Parked: func(_ context.Context, e ReconcileEvent) { parked <- e }}})
		assert.Equal(t, 2, runPass(t, rc))
		k.clock.Advance(10 * time.Minute)
		assert.Equal(t, 2, runPass(t, rc))
		recv(t, parked)
		recv(t, parked)

		// Uncertain: 409 outcome-uncertain, no Retry-After, never run again,
		// kept past its retention, never handed to a reconciler again.
		k.clock.Advance(72 * time.Hour)
		swept, err := k.store.Sweep(context.Background(), 100)
		require.NoError(t, err)
		assert.Zero(t, swept, "an uncertain record is never swept")
		assert.Zero(t, runPass(t, rc))
		retry := post(t, srv, "/v1/accounts/a-1/charges", "k-applied", `{}`)
		require.Equal(t, http.StatusConflict, retry.status, retry.body)
		assert.Equal(t, wire.ProblemOutcomeUncertain, problemName(t, retry))
		assert.Empty(t, retry.header.Get("Retry-After"), "waiting does not settle it")
		assert.Equal(t, wire.StateUncertain, retry.header.Get(wire.HeaderOperationState))
		assert.Equal(t, "false", retry.header.Get(wire.HeaderSafeNewKey))
		assert.Contains(t, retry.body, `"operation_state":"uncertain"`)
		assert.Contains(t, retry.body, `"safe_new_key":false`)
		assert.EqualValues(t, 2, h.runs.Load(), "never a second charge")

		op := NewOperator(k.store.(RecordStore), OperatorConfig{Logger: quiet(Config{}).Logger})
		page, err := op.InFlight(context.Background(), InFlightQuery{Limit: 10})
		require.NoError(t, err)
		require.Len(t, page.Records, 2, "uncertain operations are listed in flight")
		assert.Equal(t, "uncertain", page.Records[0].State)

		applied := acmeAlice
		applied.Key = "k-applied"
		_, err = op.Resolve(context.Background(), applied, Resolution{Applied: true, By: "ops@acme", Reason: "T-1: charged per the gateway",
			Response: &Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"charge":"ch_1"}`)}})
		require.NoError(t, err)
		rec, err := op.Lookup(context.Background(), applied, false)
		require.NoError(t, err)
		require.NotNil(t, rec.Resolved)
		assert.Equal(t, Resolved{By: "ops@acme", Reason: "T-1: charged per the gateway", At: rec.Resolved.At, Applied: true}, *rec.Resolved)
		assert.False(t, rec.Resolved.At.IsZero())
		retry = post(t, srv, "/v1/accounts/a-1/charges", "k-applied", `{}`)
		assert.Equal(t, http.StatusCreated, retry.status, retry.body)
		assert.JSONEq(t, `{"charge":"ch_1"}`, retry.body)
		assert.True(t, retry.replayed())
		_, err = op.Resolve(context.Background(), applied, Resolution{By: "ops@acme", Reason: "again"})
		assert.ErrorIs(t, err, ErrNotUncertain, "a resolved operation is refused")

		notApplied := acmeAlice
		notApplied.Key = "k-not-applied"
		rec, err = op.Resolve(context.Background(), notApplied, Resolution{By: "ops@acme", Reason: "T-2: no charge at the gateway"})
		require.NoError(t, err)
		assert.Equal(t, "not-applied", rec.State)
		require.NotNil(t, rec.Resolved)
		assert.False(t, rec.Resolved.Applied)
		retry = post(t, srv, "/v1/accounts/a-1/charges", "k-not-applied", `{}`)
		assert.Equal(t, http.StatusBadGateway, retry.status, "the key is free: the handler runs afresh: %s", retry.body)
		assert.EqualValues(t, 3, h.runs.Load())
		assert.Equal(t, 3, k.count(t, "gateway"))
	})
}

func TestResolveRefusals(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		op := NewOperator(k.store.(RecordStore), OperatorConfig{Logger: quiet(Config{}).Logger})
		running := leasedClaim(t, k, "k-running", 30*time.Second, time.Hour)
		require.Equal(t, VerdictClaimed, running.Verdict)
		o := Operation{Route: "POST /v1/charges", Key: "k-running"}
		_, err := op.Resolve(context.Background(), o, Resolution{By: "ops", Reason: "why"})
		assert.ErrorIs(t, err, ErrNotUncertain, "a running operation")
		o.Key = "k-none"
		_, err = op.Resolve(context.Background(), o, Resolution{By: "ops", Reason: "why"})
		assert.ErrorIs(t, err, ErrUnknownKey)
		for name, r := range map[string]Resolution{
			"no one":       {Reason: "why"},
			"no reason":    {By: "ops"},
			"no response":  {Applied: true, By: "ops", Reason: "why"},
			"a 5xx":        {Applied: true, By: "ops", Reason: "why", Response: &Response{Status: 502}},
			"a stray body": {By: "ops", Reason: "why", Response: &Response{Status: 201}},
		} {
			_, err = op.Resolve(context.Background(), o, r)
			assert.Error(t, err, name)
			assert.NotErrorIs(t, err, ErrUnknownKey, "%s: refused before the store is asked", name)
		}
	})
}
