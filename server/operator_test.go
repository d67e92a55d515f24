package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
)

// opsOf returns the Operator of k's store.
func opsOf(t *testing.T, k *kit) *Operator {
	t.Helper()
	rs, ok := k.store.(RecordStore)
	require.True(t, ok, "%s store implements RecordStore", k.name)
	return NewOperator(rs, OperatorConfig{Logger: slog.New(slog.DiscardHandler)})
}

// chargeOp names the record of key on leaseServer's route.
func chargeOp(key string) Operation { return Operation{Route: "POST /v1/charges", Key: key} }

// stick leaves a stuck lease on key: the attempt recorded its recovery
// point and answered 502, which ends its lease and keeps the record.
func stick(t *testing.T, k *kit, key string) {
	t.Helper()
	c := &charge{k: k, act: func(_ context.Context, _ *Lease, w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }}
	srv := leaseServer(t, k, c, Hooks{})
	require.Equal(t, http.StatusBadGateway, post(t, srv, "/v1/charges", key, "{}").status)
}

func TestOperatorLooksUpADoneRecord(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		srv := leaseServer(t, k, &charge{k: k}, Hooks{})
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", "k-done", `{"amount":5}`).status)

		ops := opsOf(t, k)
		rec, err := ops.Lookup(context.Background(), chargeOp("k-done"), false)
		require.NoError(t, err)
		assert.Equal(t, "done", rec.State)
		assert.Equal(t, Leased, rec.Mode)
		assert.Equal(t, http.StatusCreated, rec.Status)
		assert.Equal(t, 1, rec.Attempt)
		assert.Equal(t, fingerprint.Alg, rec.FingerprintAlg)
		assert.False(t, rec.Stuck())
		assert.False(t, rec.Expired())
		assert.InDelta(t, defaultRetention.Seconds(), rec.ExpiresAt.Sub(rec.CreatedAt).Seconds(), 1)
		require.NotNil(t, rec.Recovery)
		assert.Equal(t, "charged", rec.Recovery.Point)
		assert.Nil(t, rec.Body, "no payload unless asked")
		assert.Nil(t, rec.Request)

		full, err := ops.Lookup(context.Background(), chargeOp("k-done"), true)
		require.NoError(t, err)
		assert.JSONEq(t, `{"attempt":1}`, string(full.Body))
		require.NotNil(t, full.Request)
		assert.Equal(t, "POST", full.Request.Method)
		assert.Equal(t, "/v1/charges", full.Request.URI)
		assert.JSONEq(t, `{"amount":5}`, string(full.Request.Body))
		assert.Equal(t, "application/json", full.Request.Header.Get("Content-Type"))
	})
}

// The acceptance of issue 30: reading a record never shows a stored
// sensitive header, even one stored by an older version or by hand.
func TestOperatorNeverShowsASensitiveHeader(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		srv := leaseServer(t, k, &charge{k: k}, Hooks{})
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", "k-secret", "{}").status)
		stored := http.Header{"Content-Type": {"application/json"}, "Set-Cookie": {"session=s3cret"},
			"Authorization": {"Bearer s3cret"}, "X-Internal-Token": {"s3cret"}, "X-Shown": {"yes"}}
		setStoredHeader(t, k, chargeOp("k-secret"), stored)

		ops := NewOperator(k.store.(RecordStore), OperatorConfig{ReplayHeaders: []string{"x-shown", "Set-Cookie"},
			Logger: slog.New(slog.DiscardHandler)})
		rec, err := ops.Lookup(context.Background(), chargeOp("k-secret"), true)
		require.NoError(t, err)
		assert.Equal(t, http.Header{"Content-Type": {"application/json"}, "X-Shown": {"yes"}}, rec.Header)
		assert.Equal(t, []string{"Authorization", "Set-Cookie", "X-Internal-Token"}, rec.Withheld)
		assert.NotContains(t, fmt.Sprintf("%+v", rec), "s3cret")
	})
}

// A route may fingerprint a credential header (Config.FingerprintHeaders):
// the stored request then keeps it for a reconciler, and a read withholds
// it as it withholds the response's.
func TestOperatorNeverShowsASensitiveRequestHeader(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		mux := http.NewServeMux()
		cfg := Config{Mode: Leased, FingerprintHeaders: []string{"authorization", "X-Api-Key", "Cookie", "X-Api-Version"}}
		mux.Handle("POST /v1/charges", Middleware(k.store, quiet(cfg))(&charge{k: k}))
		srv := serve(t, mux)
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", "k-req-secret", "{}",
			"Authorization", "Bearer s3cret", "X-Api-Key", "s3cret", "Cookie", "session=s3cret", "X-Api-Version", "2").status)

		rec, err := opsOf(t, k).Lookup(context.Background(), chargeOp("k-req-secret"), true)
		require.NoError(t, err)
		require.NotNil(t, rec.Request)
		assert.Equal(t, "2", rec.Request.Header.Get("X-Api-Version"), "a header that is no credential is shown")
		for _, name := range []string{"Authorization", "X-Api-Key", "Cookie"} {
			assert.Empty(t, rec.Request.Header.Values(name), name)
			assert.Contains(t, rec.Withheld, name)
		}
		assert.NotContains(t, fmt.Sprintf("%+v", rec), "s3cret")
	})
}

// setStoredHeader replaces the stored response headers of op's record.
func setStoredHeader(t *testing.T, k *kit, op Operation, h http.Header) {
	t.Helper()
	scope := fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key)
	if k.pool != nil {
		ctx := context.Background()
		var (
			state         string
			status        *int
			headers, body []byte
		)
		require.NoError(t, k.pool.QueryRow(ctx, `SELECT state, status, headers, body FROM idem_records WHERE scope_hash = $1`,
			scope[:]).Scan(&state, &status, &headers, &body))
		res, err := responseOf(recordState(state), status, headers, body)
		require.NoError(t, err)
		res.Header = h
		_, _, stored := responseValues(res)
		_, err = k.pool.Exec(ctx, `UPDATE idem_records SET headers = $1, body = NULL WHERE scope_hash = $2`, stored, scope[:])
		require.NoError(t, err)
		return
	}
	m := k.store.(*MemoryStore)
	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := m.recs[scope].response()
	require.NoError(t, err)
	res.Header = h
	m.recs[scope].resp, _ = res.MarshalBinary()
}

func TestOperatorFindsAndEvictsAStuckLease(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		stick(t, k, "k-stuck")
		ops := opsOf(t, k)
		ctx := context.Background()

		page, err := ops.InFlight(ctx, InFlightQuery{Stuck: true})
		require.NoError(t, err)
		require.Len(t, page.Records, 1)
		rec := page.Records[0]
		assert.Equal(t, chargeOp("k-stuck").Key, rec.Key)
		assert.True(t, rec.Stuck(), "a lease that ended with a 502 is stuck")
		assert.Equal(t, "charged", rec.Recovery.Point)
		assert.LessOrEqual(t, rec.LeaseLeft(), time.Duration(0))
		assert.False(t, page.More)

		counts, err := ops.Counts(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, counts.Running)
		assert.Equal(t, 1, counts.Stuck)

		evicted, err := ops.Evict(ctx, chargeOp("k-stuck"), false)
		require.NoError(t, err, "a stuck lease needs no force")
		assert.Equal(t, "running", evicted.State)
		_, err = ops.Lookup(ctx, chargeOp("k-stuck"), false)
		assert.ErrorIs(t, err, ErrUnknownKey)

		c := &charge{k: k}
		retry := post(t, leaseServer(t, k, c, Hooks{}), "/v1/charges", "k-stuck", "{}")
		require.Equal(t, http.StatusCreated, retry.status)
		assert.JSONEq(t, `{"attempt":1}`, retry.body, "after an eviction a retry runs afresh, with no recovery point")
	})
}

// The acceptance of issue 30: evicting a live lease without force changes
// nothing; with force, the attempt that held it can no longer complete.
func TestOperatorEvictRefusesALiveLease(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		c := &charge{k: k, act: func(_ context.Context, _ *Lease, w http.ResponseWriter) {
			entered <- struct{}{}
			hold(t, release)
			w.WriteHeader(http.StatusCreated)
		}}
		srv := leaseServer(t, k, c, Hooks{})
		owner := make(chan reply)
		go func() { owner <- post(t, srv, "/v1/charges", "k-live", "{}") }()
		recv(t, entered)
		ops := opsOf(t, k)
		ctx := context.Background()
		before, err := ops.Lookup(ctx, chargeOp("k-live"), true)
		require.NoError(t, err)

		rec, err := ops.Evict(ctx, chargeOp("k-live"), false)
		require.ErrorIs(t, err, ErrLeaseLive)
		assert.Contains(t, err.Error(), "left on the lease")
		assert.Equal(t, "running", rec.State)
		after, err := ops.Lookup(ctx, chargeOp("k-live"), true)
		require.NoError(t, err)
		before.ReadAt, after.ReadAt = time.Time{}, time.Time{}
		assert.Equal(t, before, after, "a refused eviction changes nothing")

		_, err = ops.Evict(ctx, chargeOp("k-live"), true)
		require.NoError(t, err)
		close(release)
		late := recv(t, owner)
		assert.Equal(t, http.StatusConflict, late.status, "the evicted attempt's completion is refused: %s", late.body)
		_, err = ops.Lookup(ctx, chargeOp("k-live"), false)
		assert.ErrorIs(t, err, ErrUnknownKey, "the evicted attempt stored nothing")
	})
}

func TestOperatorRefusesABadScope(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		ops := opsOf(t, k)
		ctx := context.Background()
		for _, op := range []Operation{
			{Route: "", Key: "k"},
			{Route: "POST /v1/charges", Key: ""},
			{Route: "POST /v1/charges", Key: "has space"},
			{Route: "POST /v1/charges", Key: strings.Repeat("k", 256)},
		} {
			_, err := ops.Lookup(ctx, op, false)
			assert.ErrorIs(t, err, ErrBadScope, "%+v", op)
			_, err = ops.Evict(ctx, op, true)
			assert.ErrorIs(t, err, ErrBadScope, "%+v", op)
		}
		_, err := ops.Lookup(ctx, chargeOp("k-none"), false)
		assert.ErrorIs(t, err, ErrUnknownKey)
		_, err = ops.Evict(ctx, chargeOp("k-none"), true)
		assert.ErrorIs(t, err, ErrUnknownKey)
	})
}

// The Operator accepts every scope the middleware stores, whatever its
// tenant, principal and route hold (Config.Scope and Config.Route return
// what they like): a tab, a control character, more than 1 KiB (issue 41,
// item 10). A scope the store could not hold has no record.
func TestOperatorFindsEveryScopeTheMiddlewareStores(t *testing.T) {
	long := "POST /v1/" + strings.Repeat("x", 2<<10)
	scopes := []Operation{
		{Tenant: "acme\tcorp", Principal: "alice", Route: "POST /v1/charges"},
		{Tenant: "acme", Principal: "al\x1b[2Jice", Route: "POST /v1/charges"},
		{Tenant: strings.Repeat("t", 4<<10), Principal: "alice", Route: "POST /v1/charges"},
		{Tenant: "acme", Principal: "alice", Route: long},
		{Tenant: "acme", Principal: "alice", Route: "POST /v1/charges\n"},
		{Tenant: "acme", Principal: "alice", Route: " "},
		{Tenant: "caf\xe9", Principal: "alice", Route: "POST /v1/charges"}, // not UTF-8: Postgres's text refuses it
		{Tenant: "a\x00b", Principal: "alice", Route: "POST /v1/charges"},  // NUL: Postgres's text refuses it
	}
	eachStore(t, func(t *testing.T, k *kit) {
		ops := opsOf(t, k)
		ctx := context.Background()
		for i, op := range scopes {
			op.Key = fmt.Sprintf("k-scope-%d", i)
			mux := http.NewServeMux()
			cfg := Config{Mode: Leased, Scope: func(*http.Request) (string, string) { return op.Tenant, op.Principal },
				Route: func(*http.Request) string { return op.Route }}
			mux.Handle("POST /v1/charges", Middleware(k.store, quiet(cfg))(&charge{k: k}))
			srv := serve(t, mux)
			res := post(t, srv, "/v1/charges", op.Key, "{}")
			stored := res.status == http.StatusCreated
			if k.pool == nil || i < 6 {
				require.True(t, stored, "scope %d: the middleware stores it on %s", i, k.name)
			} else {
				// Bad input gets a clear error that a retry will not loop on.
				assert.Equal(t, http.StatusBadRequest, res.status, "scope %d: Postgres cannot keep it: 400, not 503", i)
				assert.Contains(t, res.body, "scope-unstorable", "scope %d", i)
			}
			rec, err := ops.Lookup(ctx, op, false)
			if !stored {
				assert.ErrorIs(t, err, ErrUnknownKey, "scope %d: not stored, so not found", i)
				continue
			}
			require.NoError(t, err, "scope %d", i)
			got := rec.Operation
			got.Attempt = 0
			assert.Equal(t, op, got, "scope %d: the record's scope, byte for byte", i)
			_, err = ops.Evict(ctx, op, true)
			require.NoError(t, err, "scope %d", i)
			_, err = ops.Lookup(ctx, op, false)
			assert.ErrorIs(t, err, ErrUnknownKey, "scope %d: evicted", i)
		}
	})
}

func TestOperatorPagesTheOperationsInFlight(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		for i := range 5 {
			stick(t, k, fmt.Sprintf("k-page-%d", i))
			k.clock.Advance(time.Second)
		}
		srv := leaseServer(t, k, &charge{k: k}, Hooks{})
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/charges", "k-page-done", "{}").status)
		ops := opsOf(t, k)

		var keys []string
		q := InFlightQuery{Limit: 2}
		for pages := 0; ; pages++ {
			require.Less(t, pages, 3, "5 records in pages of 2")
			page, err := ops.InFlight(context.Background(), q)
			require.NoError(t, err)
			for _, rec := range page.Records {
				keys = append(keys, rec.Key)
			}
			if !page.More {
				break
			}
			text := page.Next.String()
			q.After, err = ParsePosition(text)
			require.NoError(t, err)
		}
		assert.Equal(t, []string{"k-page-0", "k-page-1", "k-page-2", "k-page-3", "k-page-4"}, keys, "oldest first")

		page, err := ops.InFlight(context.Background(), InFlightQuery{Route: "POST /v1/other"})
		require.NoError(t, err)
		assert.Empty(t, page.Records)
		_, err = ParsePosition("not a position")
		assert.Error(t, err)
	})
}

// A record that a request's transaction holds is not evicted: the
// eviction waits a bounded time, then says so.
func TestOperatorEvictDoesNotWaitForAHeldRecord(t *testing.T) {
	k := postgresKit(t)
	stick(t, k, "k-held")
	ctx := context.Background()
	tx, err := k.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	scope := fingerprint.Scope("", "", "POST /v1/charges", "k-held")
	_, err = tx.Exec(ctx, `SELECT 1 FROM idem_records WHERE scope_hash = $1 FOR UPDATE`, scope[:])
	require.NoError(t, err)

	_, err = opsOf(t, k).Evict(ctx, chargeOp("k-held"), true)
	require.ErrorIs(t, err, ErrLeaseLive)
	assert.Contains(t, err.Error(), "transaction holds the record")
	require.NoError(t, tx.Rollback(ctx))
	_, err = opsOf(t, k).Lookup(ctx, chargeOp("k-held"), false)
	assert.NoError(t, err, "the record is still there")
}
