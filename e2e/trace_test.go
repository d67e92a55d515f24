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

// traceChild returns the environment entry by which a server process of
// t records its steps (trace.EnvFile), in a file of its own in a
// directory of t's. The first call of a test registers the check of all
// its processes' steps together (they share their records), which runs
// when the test ends, after the processes have stopped.
func traceChild(t *testing.T) string {
	t.Helper()
	dir, loaded := traceDirs.LoadOrStore(t, t.TempDir())
	if !loaded {
		t.Cleanup(func() {
			traceDirs.Delete(t)
			steps, err := trace.ReadFiles(dir.(string), "*.jsonl")
			require.NoError(t, err)
			require.NotEmpty(t, steps, "the server processes recorded no step")
			if v := trace.Check(steps); v != nil {
				t.Fatalf("trace of the server processes: %v", v)
			}
			t.Logf("trace of the server processes: %d steps, each allowed by the model", len(steps))
		})
	}
	return trace.EnvFile + "=" + filepath.Join(dir.(string), uuid.NewString()+".jsonl")
}
