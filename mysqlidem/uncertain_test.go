package mysqlidem

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/mysqlidem/internal/mysqltest"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// oldSchema is the table as versions before the uncertain state made it:
// schemaSQL without the resolution's columns.
func oldSchema() string {
	var lines []string
	for _, l := range strings.Split(schemaSQL, "\n") {
		if !strings.Contains(l, "resol") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestMigrateAddsTheResolutionColumns runs Migrate from eight connections
// at once on a table of the older version that holds a record: the
// resolution's columns are added once, the record is kept, and a second
// Migrate changes nothing.
func TestMigrateAddsTheResolutionColumns(t *testing.T) {
	ctx := context.Background()
	db := mysqltest.Open(t, mysqltest.Database(t), 16)
	_, err := db.Exec(oldSchema())
	require.NoError(t, err)
	s := New(db)
	c := leasedClaim("k-old")
	c.Mode, c.Lease, c.Request = server.Transactional, 0, nil
	res, err := s.Claim(ctx, c)
	require.NoError(t, err)
	require.NoError(t, res.Attempt.Complete(ctx, &server.Response{Status: 201, Body: []byte("kept")}))

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = Migrate(ctx, db) })
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	require.NoError(t, Migrate(ctx, db), "again, on the table it brought up to date")
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'idem_records'
    AND column_name IN ('resolved_by', 'resolved_at', 'resolve_reason')`).Scan(&n))
	assert.Equal(t, 3, n, "the resolution's columns")
	rec, err := s.ReadRecord(ctx, server.Operation{Tenant: "t", Principal: "p", Route: "POST /x", Key: "k-old"}, true)
	require.NoError(t, err)
	assert.Equal(t, []any{"done", "kept"}, []any{rec.State, string(rec.Body)})
	assert.Nil(t, rec.Resolved)
}

// TestUncertainThroughTheOperator parks an abandoned operation uncertain:
// the operator lists it in flight (never stuck), reads its request and
// recovery point, and resolves it applied; the record then shows who
// resolved it, when and why, and a claim replays the response given.
func TestUncertainThroughTheOperator(t *testing.T) {
	s, _ := newTestStore(t, 8)
	clock := &storetest.Clock{}
	s.offset = clock.Offset
	ctx := context.Background()
	ops := server.NewOperator(s, server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)})
	op := server.Operation{Tenant: "t", Principal: "p", Route: "POST /x", Key: "k-u"}

	res, err := s.Claim(ctx, leasedClaim("k-u"))
	require.NoError(t, err)
	att := res.Attempt.(server.LeasedAttempt)
	require.NoError(t, att.Checkpoint(ctx, "charged", []byte(`{"charge":"ch_1"}`)))
	require.NoError(t, att.Abort(ctx, false))
	taken, err := s.TakeAbandoned(ctx, []string{"POST /x"}, time.Minute, 4)
	require.NoError(t, err)
	require.Len(t, taken, 1)
	require.NoError(t, taken[0].Settler.(server.UncertainSettler).Uncertain(ctx))

	clock.Advance(2 * time.Hour) // past the retention
	tc := leasedClaim("k-u")
	tc.Mode, tc.Lease, tc.Request = server.Transactional, 0, nil
	tres, err := s.Claim(ctx, tc)
	require.NoError(t, err)
	assert.Equal(t, server.VerdictUncertain, tres.Verdict, "a Transactional claim of the scope too")
	page, err := ops.InFlight(ctx, server.InFlightQuery{})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	rec := page.Records[0]
	assert.Equal(t, []any{"uncertain", "k-u", "charged", false}, []any{rec.State, rec.Key, rec.Recovery.Point, rec.Stuck()})
	stuck, err := ops.InFlight(ctx, server.InFlightQuery{Stuck: true})
	require.NoError(t, err)
	assert.Empty(t, stuck.Records, "an uncertain operation is not stuck: it waits for a person")
	rec, err = ops.Lookup(ctx, op, false)
	require.NoError(t, err)
	assert.Equal(t, server.Leased, rec.Mode, "it keeps its stored request")
	assert.Nil(t, rec.Resolved)

	rec, err = ops.Resolve(ctx, op, server.Resolution{Applied: true, By: "ops", Reason: "T-9",
		Response: &server.Response{Status: 201, Body: []byte(`{"charge":"ch_1"}`)}})
	require.NoError(t, err)
	require.NotNil(t, rec.Resolved)
	assert.Equal(t, []any{"done", "ops", "T-9", true}, []any{rec.State, rec.Resolved.By, rec.Resolved.Reason, rec.Resolved.Applied})
	assert.WithinDuration(t, rec.ReadAt, rec.Resolved.At, time.Second, "by the store's clock")
	assert.True(t, rec.ExpiresAt.After(rec.ReadAt.Add(23*time.Hour)), "a retention of 24 h from the resolution")
	again, err := ops.Lookup(ctx, op, false)
	require.NoError(t, err)
	assert.Equal(t, rec.Resolved, again.Resolved, "kept with the record")
	replay, err := s.Claim(ctx, leasedClaim("k-u"))
	require.NoError(t, err)
	require.Equal(t, server.VerdictReplay, replay.Verdict)
	assert.Equal(t, `{"charge":"ch_1"}`, string(replay.Response.Body))
	page, err = ops.InFlight(ctx, server.InFlightQuery{})
	require.NoError(t, err)
	assert.Empty(t, page.Records, "no longer in flight")
}

// TestReclaimPassesOverAnUncertainRecord: a claim that read the record
// expired and unleased, and reclaims it after a reconciler left it
// uncertain, must not win (sqlReclaim's state condition).
func TestReclaimPassesOverAnUncertainRecord(t *testing.T) {
	s, _ := newTestStore(t, 4)
	clock := &storetest.Clock{}
	s.offset = clock.Offset
	ctx := context.Background()
	c := leasedClaim("k-race")
	res, err := s.Claim(ctx, c)
	require.NoError(t, err)
	require.NoError(t, res.Attempt.(server.LeasedAttempt).Checkpoint(ctx, "charged", nil))
	require.NoError(t, res.Attempt.Abort(ctx, false))
	clock.Advance(2 * time.Hour) // past the lease and the retention
	f, err := s.read(ctx, s.db, sqlRead, c)
	require.NoError(t, err)
	v, _ := f.decide(c)
	require.Equal(t, vReclaim, v, "what the claim read")
	require.NoError(t, res.Attempt.(server.UncertainSettler).Uncertain(ctx), "meanwhile, under the same token")

	_, won, err := s.steal(ctx, s.db, c, f, v, uuid.New())
	require.NoError(t, err)
	assert.False(t, won, "an uncertain record is never reclaimed")
	assert.Equal(t, server.VerdictUncertain, claimVerdict(t, s, c))
}

func claimVerdict(t *testing.T, s *Store, c *server.Claim) server.Verdict {
	t.Helper()
	res, err := s.Claim(context.Background(), c)
	require.NoError(t, err)
	return res.Verdict
}

// The acceptance of issue 46 item 2 on MariaDB: an operation that a
// reconciler cannot tell by MaxAge becomes uncertain (409
// outcome-uncertain, kept), and is settled both ways through the store:
// applied (later retries replay the response, with the record's expiry)
// and not applied (the next retry runs afresh).
func TestUncertainSettledBothWaysEndToEnd(t *testing.T) {
	s, _ := newTestStore(t, 8)
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		ls, _ := server.LeaseFrom(r.Context())
		_ = ls.Checkpoint(r.Context(), "charged", json.RawMessage(`{"charge":"ch_1"}`))
		w.WriteHeader(http.StatusBadGateway)
	})
	const route = "POST /v1/charges"
	mux := http.NewServeMux()
	cfg := server.Config{Mode: server.Leased, Logger: slog.New(slog.DiscardHandler),
		Scope: func(*http.Request) (string, string) { return "acme", "alice" }}
	mux.Handle(route, server.Middleware(s, cfg)(h))
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	post := func(key string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/charges", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for _, key := range []string{"u-applied", "u-not"} {
		resp, _ := post(key)
		require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	}
	parkBoth(t, s, route)

	resp, body := post("u-applied")
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	assert.Contains(t, body, wire.ProblemOutcomeUncertain)
	assert.Equal(t, wire.StateUncertain, resp.Header.Get(wire.HeaderOperationState))
	assert.EqualValues(t, 2, runs.Load(), "never run again")

	ctx := context.Background()
	applied := server.Operation{Tenant: "acme", Principal: "alice", Route: route, Key: "u-applied"}
	_, err := s.Resolve(ctx, applied, server.Resolution{Applied: true, By: "ops", Reason: "T-1", Retention: time.Hour,
		Response: &server.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}},
			Body: []byte(`{"charge":"ch_1"}`)}})
	require.NoError(t, err)
	resp, body = post("u-applied")
	assert.Equal(t, http.StatusCreated, resp.StatusCode, body)
	assert.JSONEq(t, `{"charge":"ch_1"}`, body)
	assert.Equal(t, "true", resp.Header.Get(wire.HeaderReplayed))
	kept, err := s.ReadRecord(ctx, applied, false)
	require.NoError(t, err)
	assert.Equal(t, kept.ExpiresAt.Format(http.TimeFormat), resp.Header.Get(wire.HeaderKeyExpires),
		"a replay tells the record's expiry (Idempotency-Key-Expires)")

	rec, err := s.Resolve(ctx, server.Operation{Tenant: "acme", Principal: "alice", Route: route, Key: "u-not"},
		server.Resolution{By: "ops", Reason: "T-2", Retention: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, "not-applied", rec.State)
	resp, _ = post("u-not")
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode, "the key is free: the handler runs afresh")
	assert.EqualValues(t, 3, runs.Load())
	_, err = s.Resolve(ctx, applied, server.Resolution{By: "ops", Reason: "again", Retention: time.Hour})
	assert.ErrorIs(t, err, server.ErrNotUncertain)
}

// parkBoth runs a reconciler that cannot tell route's two abandoned
// operations until it has left both uncertain (MaxAge 1 ns).
func parkBoth(t *testing.T, s *Store, route string) {
	t.Helper()
	parked := make(chan struct{}, 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.RunReconciler(ctx, s, server.ReconcileConfig{MaxAge: time.Nanosecond, Interval: 20 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler),
			Routes: map[string]server.ReconcileFunc{route: func(context.Context, *server.Abandoned) (server.Settlement, error) {
				return server.Settlement{Answer: server.NotKnown}, nil
			}},
			Hooks: server.ReconcileHooks{Parked: func(context.Context, server.ReconcileEvent) { parked <- struct{}{} }}})
	}()
	defer func() { cancel(); <-done }()
	for range 2 {
		select {
		case <-parked:
		case <-time.After(30 * time.Second):
			t.Fatal("the reconciler left nothing uncertain")
		}
	}
}

// TestResolveIsOneStep resolves one uncertain operation from eight
// goroutines at once, half applied and half not: exactly one resolution
// wins, the others are refused as not uncertain, and the record is as the
// winner left it.
func TestResolveIsOneStep(t *testing.T) {
	s, _ := newTestStore(t, 16)
	ctx := context.Background()
	res, err := s.Claim(ctx, leasedClaim("k-once"))
	require.NoError(t, err)
	require.NoError(t, res.Attempt.(server.UncertainSettler).Uncertain(ctx))
	op := server.Operation{Tenant: "t", Principal: "p", Route: "POST /x", Key: "k-once"}

	var wg sync.WaitGroup
	recs, errs := make([]server.Record, 8), make([]error, 8)
	for i := range errs {
		r := server.Resolution{By: "ops", Reason: "T-1", Retention: time.Hour}
		if i%2 == 0 {
			r.Applied, r.Response = true, &server.Response{Status: 201}
		}
		wg.Go(func() { recs[i], errs[i] = s.Resolve(ctx, op, r) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, won, "a second resolution won")
			won = i
			continue
		}
		assert.ErrorIs(t, err, server.ErrNotUncertain)
	}
	require.NotEqual(t, -1, won, "one resolution wins")
	rec, err := s.ReadRecord(ctx, op, false)
	require.NoError(t, err)
	assert.Equal(t, recs[won].State, rec.State)
	assert.Equal(t, won%2 == 0, rec.Resolved.Applied)
}
