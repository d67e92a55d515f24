package mysqlidem

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
