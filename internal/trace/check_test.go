package trace

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// at is a step's interval in ticks of a millisecond.
func at(s Step, start, end int) Step {
	s.Scope = "s"
	s.Start = time.Unix(0, 0).Add(time.Duration(start) * time.Millisecond)
	s.End = time.Unix(0, 0).Add(time.Duration(end) * time.Millisecond)
	return s
}

func TestCheck(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	insertA := Step{Op: Insert, New: a, OK: true}
	doneA := Step{Op: Complete, Token: a, OK: true, Wrote: State{Kind: "done"}}
	readDoneA := Step{Op: Read, Saw: State{Kind: "done", Token: a}}
	takeoverB := Step{Op: Takeover, Token: a, New: b, OK: true}
	staleA := doneA
	c := uuid.New()
	parkA := Step{Op: Settle, Token: a, OK: true, Wrote: State{Kind: "uncertain"}}
	resolveB := Step{Op: Resolve, New: b, OK: true, Wrote: State{Kind: "done"}}
	readDoneB := Step{Op: Read, Saw: State{Kind: "done", Token: b}}
	tests := []struct {
		name  string
		steps []Step
		bad   Op // "" when allowed
	}{
		{"in order", []Step{at(insertA, 0, 1), at(doneA, 2, 3), at(readDoneA, 4, 5)}, ""},
		// the completion and the read overlap: the read committed last
		{"overlapping, emitted out of order", []Step{at(insertA, 0, 1), at(readDoneA, 2, 5), at(doneA, 2, 4)}, ""},
		{"a read before its write", []Step{at(insertA, 0, 1), at(readDoneA, 2, 3), at(doneA, 4, 5)}, Read},
		{"a stale completion", []Step{at(insertA, 0, 1), at(takeoverB, 2, 3), at(staleA, 4, 5)}, Complete},
		{"a stale completion refused", []Step{at(insertA, 0, 1), at(takeoverB, 2, 3), at(Step{Op: Complete, Token: a}, 4, 5)}, ""},
		{"a valid completion refused", []Step{at(insertA, 0, 1), at(Step{Op: Complete, Token: a}, 2, 3)}, Complete},
		{"a completion of unknown outcome, read done", []Step{at(insertA, 0, 1), at(Step{Op: Complete, Token: a, Unknown: true, Wrote: State{Kind: "done"}}, 2, 3), at(readDoneA, 4, 5)}, ""},
		{"a takeover of a completed record", []Step{at(insertA, 0, 1), at(doneA, 2, 3), at(takeoverB, 4, 5)}, Takeover},
		{"a second insert", []Step{at(insertA, 0, 1), at(Step{Op: Insert, New: b, OK: true}, 2, 3)}, Insert},
		{"resolved applied, read done", []Step{at(insertA, 0, 1), at(parkA, 2, 3), at(resolveB, 4, 5), at(readDoneB, 6, 7)}, ""},
		{"resolved not applied, reclaimed", []Step{at(insertA, 0, 1), at(parkA, 2, 3), at(Step{Op: Resolve, New: b, OK: true, Wrote: State{Kind: "not-applied"}}, 4, 5), at(Step{Op: Reclaim, New: c, OK: true}, 6, 7)}, ""},
		{"a read done of an unresolved record", []Step{at(insertA, 0, 1), at(parkA, 2, 3), at(readDoneB, 4, 5)}, Read},
		{"a resolve of a running record", []Step{at(insertA, 0, 1), at(resolveB, 2, 3)}, Resolve},
		{"a resolve refused on an uncertain record", []Step{at(insertA, 0, 1), at(parkA, 2, 3), at(Step{Op: Resolve, New: b, Wrote: State{Kind: "done"}}, 4, 5)}, Resolve},
		{"a sweep of an uncertain record", []Step{at(insertA, 0, 1), at(parkA, 2, 3), at(Step{Op: Sweep, OK: true}, 4, 5)}, Sweep},
		{"a reclaim of an uncertain record", []Step{at(insertA, 0, 1), at(parkA, 2, 3), at(Step{Op: Reclaim, New: c, OK: true}, 4, 5)}, Reclaim},
		{"a claim of an uncertain record", []Step{at(insertA, 0, 1), at(parkA, 2, 3), at(Step{Op: Claim, New: c, OK: true}, 4, 5)}, Claim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Check(tt.steps)
			if tt.bad == "" {
				require.Nil(t, v)
				return
			}
			require.NotNil(t, v, "Check(%v) = nil, want a violation at %s", tt.steps, tt.bad)
			require.Equal(t, tt.bad, v.Step.Op, "%v", v)
			require.Contains(t, v.Error(), "model state")
		})
	}
}
