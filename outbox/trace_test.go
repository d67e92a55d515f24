package outbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/trace"
)

// TestOutboxLifecycleTraced: the lifecycle run's deliveries and re-drives
// are ones outbox.pml allows (trace.CheckOutbox).
func TestOutboxLifecycleTraced(t *testing.T) {
	rec := lifecycleRun(t)
	ds := rec.Deliveries()
	require.GreaterOrEqual(t, len(ds), 7, "deliveries and re-drives recorded: %+v", ds)
	require.NoError(t, trace.CheckOutbox(ds))
}

// TestOutboxTraceCatchesSeededFaults: each fault seeded into the outbox's
// code makes the lifecycle run's trace break outbox.pml's guards.
func TestOutboxTraceCatchesSeededFaults(t *testing.T) {
	for _, f := range []trace.Fault{trace.OutboxRedrivePastRetention, trace.OutboxIgnoresRetention, trace.OutboxRedriveNewKey} {
		t.Run(string(f), func(t *testing.T) {
			trace.Seed(t, f)
			rec := lifecycleRun(t)
			err := trace.CheckOutbox(rec.Deliveries())
			require.Error(t, err, "the trace of a run with %s seeded passed outbox.pml's guards", f)
			t.Logf("%s caught: %v", f, err)
		})
	}
}

// lifecycleRun runs two messages through the memory outbox, on a clock the
// test moves, to downstreams that act on a key's first request and drop
// its response, then answer 503. A: parked after its two deliveries,
// re-driven in time (same key: two more), parked, then re-driven past the
// key retention (refused). B: its first delivery takes the clock past the
// retention, so it is parked for it instead of delivered again.
func lifecycleRun(t *testing.T) *trace.Recorder {
	t.Helper()
	rec := trace.Start(t)
	clock := &offsetClock{}
	cfg := fastConfig(&events{})
	cfg.MaxAttempts, cfg.KeyRetention = 2, testRetention
	tg, q := memoryTarget(cfg)
	q.s.now = clock.now
	f := newForgetful(t)
	late := lateDownstream(t, clock)
	running(t, tg.run)
	ctx := context.Background()

	idA, err := tg.enqueue(ctx, Message{Name: "a", Method: "POST", URL: f.srv.URL + "/hook", Key: "k-a", Body: []byte("{}")})
	require.NoError(t, err)
	tg.waitParked(t, 1, "A parked after an ambiguous delivery and a 503")
	require.NoError(t, tg.redrive(ctx, idA))
	eventually(t, func() bool { return f.total() >= 4 }, "A sent again")
	tg.waitParked(t, 1, "A parked again")
	clock.advance(testRetention * 3 / 2)
	_ = tg.redrive(ctx, idA) // ErrPastRetention, unless a fault lets it through
	tg.waitParked(t, 1, "A parked")

	_, err = tg.enqueue(ctx, Message{Name: "b", Method: "POST", URL: late.URL + "/hook", Key: "k-b", Body: []byte("{}")})
	require.NoError(t, err)
	tg.waitParked(t, 2, "B parked")
	return rec
}

// total is how many requests f received, under any key.
func (f *forgetful) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.seen {
		n += c
	}
	return n
}

// lateDownstream acts on its first request and, as it does, moves clock
// past the key retention (a delivery that took that long), then drops the
// response; it answers 503 after.
func lateDownstream(t *testing.T, clock *offsetClock) *httptest.Server {
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) > 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		clock.advance(testRetention * 3 / 2)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}
