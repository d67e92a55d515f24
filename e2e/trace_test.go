package e2e

import (
	"testing"

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
