package e2e

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/trace"
)

// traceRun records the lifecycle steps that the run's in-process stores
// perform (internal/trace) and, when the test ends, after the nodes have
// stopped (it must be called before they start), checks them against the
// record lifecycle's model: a step the model forbids fails the test, as
// does a run that recorded none.
func traceRun(t *testing.T) *trace.Recorder {
	t.Helper()
	rec := trace.Start(t)
	t.Cleanup(func() { rec.Require(t, 1) })
	return rec
}

// traceDirs are the directories where each test's server processes
// record their steps.
var traceDirs sync.Map // *testing.T -> string

// traceChild returns the environment entry by which a server or
// dispatcher process of t records its steps (trace.EnvFile), in a file of its own in a
// directory of t's. The first call of a test registers the check of all
// its processes' steps together (they share their records), which runs
// when the test ends, after the processes have stopped.
func traceChild(t *testing.T) string {
	t.Helper()
	dir, loaded := traceDirs.LoadOrStore(t, t.TempDir())
	if !loaded {
		t.Cleanup(func() {
			traceDirs.Delete(t)
			steps, ds, err := trace.ReadFiles(dir.(string), "*.jsonl")
			require.NoError(t, err)
			require.Positive(t, len(steps)+len(ds), "the processes recorded no step")
			if v := trace.Check(steps); v != nil {
				t.Fatalf("trace of the processes: %v", v)
			}
			require.NoError(t, trace.CheckOutbox(ds), "trace of the processes")
			t.Logf("trace of the processes: %d steps and %d outbox steps, each allowed by the model", len(steps), len(ds))
		})
	}
	return trace.EnvFile + "=" + filepath.Join(dir.(string), uuid.NewString()+".jsonl")
}
