package mysqlidem

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// TestOperator looks records up, lists the operations in flight page by
// page, evicts, and counts, through server.Operator on the store: a
// Transactional record done over HTTP, three Leased operations running
// (one of them stuck once the clock passes its lease).
func TestOperator(t *testing.T) {
	s, _ := newTestStore(t, 8)
	clock := &storetest.Clock{}
	s.offset = clock.Offset
	ctx := context.Background()
	ops := server.NewOperator(s, server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)})

	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"paid":true}`))
	})
	srv := httptest.NewServer(server.Middleware(s, server.Config{Mode: server.Transactional, Logger: slog.New(slog.DiscardHandler)})(h))
	defer srv.Close()
	code, _ := postKey(t, srv.URL, "k-done")
	require.Equal(t, http.StatusCreated, code)
	done := server.Operation{Route: "POST /", Key: "k-done"}
	rec, err := ops.Lookup(ctx, done, true)
	require.NoError(t, err)
	assert.Equal(t, "done", rec.State)
	assert.Equal(t, server.Transactional, rec.Mode)
	assert.Equal(t, 201, rec.Status)
	assert.Equal(t, `{"paid":true}`, string(rec.Body))
	assert.Equal(t, "application/json", rec.Header.Get("Content-Type"))
	assert.WithinDuration(t, rec.ReadAt, rec.CreatedAt, time.Minute)
	assert.False(t, rec.Expired())

	for i := range 3 {
		c := leasedClaim(fmt.Sprintf("k-run-%d", i))
		c.Lease = time.Duration(i+1) * time.Minute
		res, err := s.Claim(ctx, c)
		require.NoError(t, err)
		require.NoError(t, res.Attempt.(server.LeasedAttempt).Checkpoint(ctx, "charged", []byte(`{"n":1}`)))
	}
	clock.Advance(90 * time.Second) // k-run-0's lease has ended
	page, err := ops.InFlight(ctx, server.InFlightQuery{Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Records, 2)
	require.True(t, page.More)
	next, err := ops.InFlight(ctx, server.InFlightQuery{Limit: 2, After: page.Next})
	require.NoError(t, err)
	require.Len(t, next.Records, 1)
	keys := []string{page.Records[0].Key, page.Records[1].Key, next.Records[0].Key}
	assert.ElementsMatch(t, []string{"k-run-0", "k-run-1", "k-run-2"}, keys)
	stuck, err := ops.InFlight(ctx, server.InFlightQuery{Stuck: true})
	require.NoError(t, err)
	require.Len(t, stuck.Records, 1)
	assert.Equal(t, "k-run-0", stuck.Records[0].Key)
	assert.True(t, stuck.Records[0].Stuck())
	assert.Equal(t, "charged", stuck.Records[0].Recovery.Point)

	found, err := ops.LookupKey(ctx, "k-run-1")
	require.NoError(t, err)
	require.Len(t, found, 1, "the key alone finds its scope")
	assert.Equal(t, "POST /x", found[0].Route)
	found, err = ops.LookupKey(ctx, "k-none")
	require.NoError(t, err)
	assert.Empty(t, found)

	counts, err := ops.Counts(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, counts.Running)
	assert.Equal(t, 1, counts.Stuck)

	live := server.Operation{Tenant: "t", Principal: "p", Route: "POST /x", Key: "k-run-1"}
	_, err = ops.Evict(ctx, live, false)
	assert.ErrorIs(t, err, server.ErrLeaseLive, "a live lease is kept: %v", err)
	_, err = ops.Evict(ctx, live, true)
	require.NoError(t, err, "forced")
	_, err = ops.Lookup(ctx, live, false)
	assert.ErrorIs(t, err, server.ErrUnknownKey)
	_, err = ops.Evict(ctx, done, false)
	require.NoError(t, err, "a done record goes")
	code, _ = postKey(t, srv.URL, "k-done")
	assert.Equal(t, http.StatusCreated, code, "the key runs afresh")
}

// TestEvictWaitsBoundedForAHeldRecord evicts the record of a running
// Transactional claim, whose open transaction holds the row: the eviction
// gives up after its bound and reports the record held, changing nothing.
func TestEvictWaitsBoundedForAHeldRecord(t *testing.T) {
	s, _ := newTestStore(t, 4)
	ctx := context.Background()
	c := leasedClaim("k-held")
	c.Mode, c.Lease, c.Request = server.Transactional, 0, nil
	res, err := s.Claim(ctx, c)
	require.NoError(t, err)
	require.Equal(t, server.VerdictClaimed, res.Verdict)
	ops := server.NewOperator(s, server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)})
	op := server.Operation{Tenant: "t", Principal: "p", Route: "POST /x", Key: "k-held"}
	_, err = ops.Evict(ctx, op, true)
	assert.ErrorIs(t, err, server.ErrLeaseLive, "even forced, a held row is not deleted: %v", err)
	require.NoError(t, res.Attempt.Complete(ctx, &server.Response{Status: 201}))
	rec, err := ops.Lookup(ctx, op, false)
	require.NoError(t, err)
	assert.Equal(t, "done", rec.State, "the claim committed its record")
}

// TestLookupDecodesTheStoredRequest looks up, with its payload, a Leased
// record that a request left stuck (a 502 after a recovery point): its
// stored request comes back decoded, as server's own stores give it.
func TestLookupDecodesTheStoredRequest(t *testing.T) {
	s, _ := newTestStore(t, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls, _ := server.LeaseFrom(r.Context())
		_ = ls.Checkpoint(r.Context(), "gateway-called", nil)
		w.WriteHeader(http.StatusBadGateway)
	})
	srv := httptest.NewServer(server.Middleware(s, server.Config{Mode: server.Leased, Logger: slog.New(slog.DiscardHandler)})(h))
	defer srv.Close()
	code, _ := postKey(t, srv.URL, "k-stuck")
	require.Equal(t, http.StatusBadGateway, code)

	ops := server.NewOperator(s, server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)})
	rec, err := ops.Lookup(context.Background(), server.Operation{Route: "POST /", Key: "k-stuck"}, true)
	require.NoError(t, err)
	assert.Equal(t, server.Leased, rec.Mode)
	require.NotNil(t, rec.Request, "the stored request, decoded")
	assert.Equal(t, http.MethodPost, rec.Request.Method)
	assert.Equal(t, "/", rec.Request.URI)
	assert.Equal(t, "{}", string(rec.Request.Body))
	assert.Equal(t, "application/json", rec.Request.Header.Get("Content-Type"))
	rec, err = ops.Lookup(context.Background(), server.Operation{Route: "POST /", Key: "k-stuck"}, false)
	require.NoError(t, err)
	assert.Nil(t, rec.Request, "no payload, no request")
}
