package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/server"
)

// The areas of an uncertain operation (server.UncertainSettler and
// server.Resolver), which a store without them skips, saying so.
var uncertainAreas = []area{
	{"UncertainIsKeptUntilResolved", onlyLeased, testUncertainKept},
	{"ResolveAppliedOrNot", onlyLeased, testResolve},
}

// uncertainClaim is leasedClaim under the scope the middleware gives the
// operation, by which a [server.Resolver] finds it.
func uncertainClaim(key string, digest byte) *server.Claim {
	c := leasedClaim(key, 30*time.Second, time.Hour, digest)
	c.Scope = fingerprint.Scope(c.Tenant, c.Principal, c.Route, c.Key)
	return c
}

func uncertainOp(key string) server.Operation {
	return server.Operation{Tenant: "acme", Principal: "alice", Route: chargesRoute, Key: key}
}

// park abandons key's operation, takes it over and leaves it uncertain,
// and returns the settler that did.
func (e *env) park(key string) server.UncertainSettler {
	e.t.Helper()
	ctx := context.Background()
	att := e.claimed(uncertainClaim(key, 1))
	require.NoError(e.t, att.Checkpoint(ctx, "charged", []byte(`{"charge":"ch_1"}`)))
	require.NoError(e.t, att.Abort(ctx, false))
	ts := e.take(e.store, charges, 20*time.Second, 16)
	require.Len(e.t, ts, 1)
	u, ok := ts[0].Settler.(server.UncertainSettler)
	if !ok {
		e.t.Skipf("storetest: the store's Settler (%T) does not implement server.UncertainSettler: "+
			"an operation not known at MaxAge is settled as result-unavailable", ts[0].Settler)
	}
	require.NoError(e.t, u.Uncertain(ctx))
	return u
}

// An uncertain operation answers its retries VerdictUncertain (another
// request VerdictMismatch), past its retention and a sweep, is never taken
// by a reconciler again, and refuses a second settlement of the same token.
func testUncertainKept(t *testing.T, e *env, _ mode) {
	ctx := context.Background()
	u := e.park("u-0")
	assert.Equal(t, server.VerdictUncertain, e.claim(uncertainClaim("u-0", 1)).Verdict)
	assert.Equal(t, server.VerdictMismatch, e.claim(uncertainClaim("u-0", 2)).Verdict)
	assert.ErrorIs(t, u.Uncertain(ctx), server.ErrLeaseLost, "its token settles nothing more")
	assert.ErrorIs(t, u.Free(ctx), server.ErrLeaseLost)

	e.clock.Advance(3 * time.Hour)
	_, err := e.store.Sweep(ctx, 100)
	require.NoError(t, err)
	assert.Equal(t, server.VerdictUncertain, e.claim(uncertainClaim("u-0", 1)).Verdict, "kept past its retention and a sweep")
	assert.Empty(t, e.take(e.store, charges, 20*time.Second, 16), "never taken again")
}

// Resolve settles only an uncertain operation: applied, later claims
// replay its response; not applied, the next claim runs afresh.
func testResolve(t *testing.T, e *env, _ mode) {
	ctx := context.Background()
	e.park("r-applied")
	e.park("r-not")
	rs, ok := e.store.(server.Resolver)
	if !ok {
		t.Skipf("storetest: the store (%T) does not implement server.Resolver", e.store)
	}
	e.clock.Advance(2 * time.Hour) // past the retention: an applied record answers a retention from now
	rec, err := rs.Resolve(ctx, uncertainOp("r-applied"), server.Resolution{Applied: true, Response: created(`{"by":"ops"}`),
		By: "ops", Reason: "T-1", Retention: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, "done", rec.State)
	require.NotNil(t, rec.Resolved)
	assert.Equal(t, []any{"ops", "T-1", true}, []any{rec.Resolved.By, rec.Resolved.Reason, rec.Resolved.Applied})
	res := e.claim(uncertainClaim("r-applied", 1))
	require.Equal(t, server.VerdictReplay, res.Verdict)
	assert.Equal(t, `{"by":"ops"}`, string(res.Response.Body))
	_, err = rs.Resolve(ctx, uncertainOp("r-applied"), server.Resolution{By: "ops", Reason: "again", Retention: time.Hour})
	assert.ErrorIs(t, err, server.ErrNotUncertain)
	assert.Equal(t, server.VerdictReplay, e.claim(uncertainClaim("r-applied", 1)).Verdict, "the refusal changed nothing")

	rec, err = rs.Resolve(ctx, uncertainOp("r-not"), server.Resolution{By: "ops", Reason: "T-2", Retention: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, "not-applied", rec.State)
	fresh := e.claimed(uncertainClaim("r-not", 2))
	assert.Equal(t, 1, fresh.Number(), "the key is free: a new operation, any digest")

	e.claimed(uncertainClaim("r-running", 1))
	_, err = rs.Resolve(ctx, uncertainOp("r-running"), server.Resolution{By: "ops", Reason: "T-3", Retention: time.Hour})
	assert.ErrorIs(t, err, server.ErrNotUncertain, "a running operation")
	_, err = rs.Resolve(ctx, uncertainOp("r-none"), server.Resolution{By: "ops", Reason: "T-4", Retention: time.Hour})
	assert.ErrorIs(t, err, server.ErrUnknownKey)
}
