package mysqlidem

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// traceDirs are the directories where each test's payserver processes
// record their steps.
var traceDirs sync.Map // *testing.T -> string

// traceChild returns the environment entry by which a payserver of t
// records its steps (trace.EnvFile), in a file of its own in a directory
// of t's. The first call of a test registers the check of all its
// processes' steps together (they share their records), which runs when
// the test ends, after the processes were killed (their cleanups were
// registered later, and so run first).
func traceChild(t *testing.T) string {
	t.Helper()
	dir, loaded := traceDirs.LoadOrStore(t, t.TempDir())
	if !loaded {
		t.Cleanup(func() {
			traceDirs.Delete(t)
			steps, _, err := trace.ReadFiles(dir.(string), "*.jsonl")
			require.NoError(t, err)
			require.NotEmpty(t, steps, "the processes recorded no step")
			if v := trace.Check(steps); v != nil {
				t.Fatalf("trace of the processes: %v", v)
			}
			t.Logf("trace of the processes: %d steps, each allowed by the model", len(steps))
		})
	}
	return trace.EnvFile + "=" + filepath.Join(dir.(string), uuid.NewString()+".jsonl")
}

// TestTraceCatchesSeededFault: an attempt whose lease ended is taken over,
// and then completes with its stale token. The store refuses it, and the
// trace passes; with trace.CompleteIgnoresToken seeded (a completion
// without its token in the WHERE clause), the stale completion overwrites
// the new attempt's record, and the trace check refuses that step.
func TestTraceCatchesSeededFault(t *testing.T) {
	t.Run("correct", func(t *testing.T) {
		rec := trace.Start(t)
		require.ErrorIs(t, staleComplete(t), server.ErrLeaseLost)
		rec.Require(t, 5)
	})
	t.Run(string(trace.CompleteIgnoresToken), func(t *testing.T) {
		trace.Seed(t, trace.CompleteIgnoresToken)
		rec := trace.Start(t)
		require.NoError(t, staleComplete(t), "the mutant's stale completion took effect")
		v := trace.Check(rec.Steps())
		require.NotNil(t, v, "the trace of a run with %s seeded passed the model", trace.CompleteIgnoresToken)
		require.Equal(t, trace.Complete, v.Step.Op, "the step refused: %v", v)
		t.Logf("%s caught at %v: %s", trace.CompleteIgnoresToken, v.Step, v.Why)
	})
}

// staleComplete claims a key, moves the clock past the lease, takes the
// attempt over with a second claim, and returns the first attempt's
// completion's error.
func staleComplete(t *testing.T) error {
	s, _ := newTestStore(t, 4)
	var offset time.Duration
	s.offset = func() time.Duration { return offset }
	ctx := context.Background()
	first, err := s.Claim(ctx, leasedClaim("k-stale"))
	require.NoError(t, err)
	require.Equal(t, server.VerdictClaimed, first.Verdict)
	offset = 2 * time.Minute // past the first lease, within retention
	second, err := s.Claim(ctx, leasedClaim("k-stale"))
	require.NoError(t, err)
	require.Equal(t, server.VerdictClaimed, second.Verdict, "the takeover")
	require.Equal(t, 2, second.Attempt.Number())
	return first.Attempt.Complete(ctx, &server.Response{Status: 201, Body: []byte("stale")})
}
