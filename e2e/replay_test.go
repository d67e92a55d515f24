package e2e

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/testserver"
)

// TestChaosReplaysWithSeed: two runs with one seed meet the same fault at
// every (operation, attempt) that both made, and each makes every attempt
// that its faults force (the first of each operation, and the one after
// each attempt whose response a fault spoiled). Other attempts come from
// timing (an attempt that timed out in one run only on a busy machine, a
// resend by net/http on a broken keep-alive connection): they are logged,
// not compared. The forced attempts are checked per run: a fault that
// spoiled an attempt made by one run only forces the next attempt in that
// run only (the other run never met it), while a fault at an attempt both
// made is the same in both (the first check) and so forces the next
// attempt in both.
func TestChaosReplaysWithSeed(t *testing.T) {
	seed := testserver.Seed(t)
	const n = 300
	first, second := runChaos(t, seed, n), runChaos(t, seed, n)
	for _, run := range []chaosRun{first, second} {
		requireExactlyOnce(t, run.db, seed, run.ops, run.verdicts, testserver.Summarize(run.events).String())
	}
	a, b := faultsByAttempt(first.events), faultsByAttempt(second.events)
	var compared, faulted int
	for at, fault := range a {
		if other, ok := b[at]; ok {
			require.Equal(t, fault, other, "%s: the fault of the first run, then of the second (IDEM_SEED=%d)", at, seed)
			compared++
			if fault.Kind != testserver.FaultNone {
				faulted++
			}
		}
	}
	for i, run := range []map[opAttempt]testserver.Fault{a, b} {
		require.Empty(t, missingForced(first.ops, run), "attempts forced by the faults of run %d that it did not make (IDEM_SEED=%d)", i+1, seed)
	}
	require.GreaterOrEqual(t, faulted, 20, "faulted attempts compared, want enough to mean something")
	t.Logf("%d attempts made by both runs, %d of them faulted, each alike; made by one run only: %v",
		compared, faulted, append(onlyIn(a, b), onlyIn(b, a)...))
}

// opAttempt names attempt n of an operation.
type opAttempt struct {
	op      string
	attempt int
}

func (a opAttempt) String() string { return fmt.Sprintf("%s attempt %d", a.op, a.attempt) }

// faultsByAttempt maps each (operation, attempt) of an event log to the
// fault it met.
func faultsByAttempt(events []testserver.Event) map[opAttempt]testserver.Fault {
	out := make(map[opAttempt]testserver.Fault, len(events))
	for _, e := range events {
		if e.Op != "" {
			out[opAttempt{e.Op, e.Attempt}] = e.Fault
		}
	}
	return out
}

// forcedAttempts returns the attempts that the faults of a run force: the
// first of each operation, and the next after each attempt whose fault
// keeps its response from the client.
func forcedAttempts(ops []operation, faults map[opAttempt]testserver.Fault, attemptTimeout time.Duration) []opAttempt {
	var out []opAttempt
	for _, op := range ops {
		out = append(out, opAttempt{op.key, 1})
	}
	for at, fault := range faults {
		if spoils(fault, attemptTimeout) {
			out = append(out, opAttempt{at.op, at.attempt + 1})
		}
	}
	return out
}

// missingForced lists, sorted, the attempts that the faults of a run
// force (forcedAttempts) and that the run did not make.
func missingForced(ops []operation, run map[opAttempt]testserver.Fault) []string {
	var out []string
	for _, at := range forcedAttempts(ops, run, chaosAttemptTimeout) {
		if _, ok := run[at]; !ok {
			out = append(out, at.String())
		}
	}
	sort.Strings(out)
	return out
}

// spoils reports whether fault keeps the response from a client whose
// attempts time out after attemptTimeout, so that the client must retry.
func spoils(f testserver.Fault, attemptTimeout time.Duration) bool {
	switch f.Kind {
	case testserver.FaultNone, testserver.FaultSlowRead, testserver.FaultSlowBody:
		return false // the mix's slow reads and bodies end well within the timeout
	case testserver.FaultDelay:
		return f.Delay >= attemptTimeout
	}
	return true
}

// onlyIn lists, sorted, the attempts of a that b does not have.
func onlyIn(a, b map[opAttempt]testserver.Fault) []string {
	var out []string
	for at := range a {
		if _, ok := b[at]; !ok {
			out = append(out, at.String())
		}
	}
	sort.Strings(out)
	return out
}

// A run whose first attempt timed out on a busy machine makes a second
// attempt the other run never made; a fault there forces a third in that
// run only. Neither run misses an attempt its own faults force.
func TestForcedAttemptsArePerRun(t *testing.T) {
	ops := []operation{{key: "x"}}
	none, reset := testserver.Fault{Kind: testserver.FaultNone}, testserver.Fault{Kind: testserver.FaultReset}
	slow := map[opAttempt]testserver.Fault{{"x", 1}: none, {"x", 2}: reset, {"x", 3}: none}
	fast := map[opAttempt]testserver.Fault{{"x", 1}: none}
	require.Empty(t, missingForced(ops, slow))
	require.Empty(t, missingForced(ops, fast))
	require.Equal(t, []string{"x attempt 3"}, missingForced(ops, map[opAttempt]testserver.Fault{{"x", 1}: none, {"x", 2}: reset}),
		"a fault that spoiled attempt 2 forces attempt 3")
	require.Equal(t, []string{"x attempt 1"}, missingForced(ops, map[opAttempt]testserver.Fault{}), "the first attempt is forced")
}
