package trace

import (
	"fmt"
	"sort"
	"strings"
)

// Violation is the first step of a scope's trace that the model does not
// allow, in any order of the steps consistent with their intervals.
type Violation struct {
	Scope string
	// Placed are the steps of the longest allowed prefix found, in order;
	// State is the model's state after them.
	Placed []Step
	State  State
	// Step is the step that could not come next, and Why the model's
	// reason.
	Step Step
	Why  string
	// Trace is the scope's whole trace, in the order it was emitted.
	Trace []Step
}

func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scope %s: step %v not allowed by the model: %s\nmodel state: %v\nplaced:", v.Scope, v.Step, v.Why, v.State)
	for _, s := range v.Placed {
		fmt.Fprintf(&b, "\n  %v", s)
	}
	b.WriteString("\ntrace:")
	for _, s := range v.Trace {
		fmt.Fprintf(&b, "\n  %v", s)
	}
	return b.String()
}

// Check checks steps, scope by scope, and returns the first violation of
// the model, or nil when each scope's steps have an order consistent with
// their intervals in which the model allows every step.
func Check(steps []Step) *Violation {
	scopes := byScope(steps)
	names := make([]string, 0, len(scopes))
	for k := range scopes {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if v := checkScope(k, scopes[k]); v != nil {
			return v
		}
	}
	return nil
}

func byScope(steps []Step) map[string][]Step {
	m := map[string][]Step{}
	for _, s := range steps {
		m[s.Scope] = append(m[s.Scope], s)
	}
	return m
}

// searchBudget bounds the orders a scope's check tries: far above what
// the few concurrent steps of one scope need.
const searchBudget = 200000

// checkScope searches an allowed order of one scope's steps.
func checkScope(scope string, trace []Step) *Violation {
	steps := append([]Step(nil), trace...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Start.Before(steps[j].Start) })
	l := &linearizer{steps: steps, done: make([]bool, len(steps)), seen: map[string]bool{}, budget: searchBudget}
	if l.search(None, nil) {
		return nil
	}
	v := l.best
	if l.budget <= 0 {
		v.Why = fmt.Sprintf("no allowed order found within %d tries (last refusal: %s)", searchBudget, v.Why)
	}
	v.Scope, v.Trace = scope, trace
	return &v
}

type linearizer struct {
	steps  []Step
	done   []bool
	seen   map[string]bool // failed (remaining steps, state) pairs
	budget int
	best   Violation
	bestN  int
}

// search places the remaining steps after placed, from state cur.
func (l *linearizer) search(cur State, placed []Step) bool {
	if len(placed) == len(l.steps) {
		return true
	}
	key := l.key(cur)
	if l.seen[key] || l.budget <= 0 {
		return false
	}
	l.budget--
	for i, s := range l.steps {
		if l.done[i] || !l.minimal(i) {
			continue
		}
		for _, t := range alternatives(s) {
			next, err := apply(cur, t)
			if err != nil {
				l.note(cur, placed, s, err)
				continue
			}
			l.done[i] = true
			if l.search(next, append(placed, t)) {
				return true
			}
			l.done[i] = false
		}
	}
	l.seen[key] = true
	return false
}

// minimal reports whether step i may come next: no remaining step ended
// before it started.
func (l *linearizer) minimal(i int) bool {
	for j, s := range l.steps {
		if !l.done[j] && j != i && s.End.Before(l.steps[i].Start) {
			return false
		}
	}
	return true
}

// alternatives are the steps s may have been: taken or not when its
// outcome is unknown; a Release or an EndLease for an Abort.
func alternatives(s Step) []Step {
	var out []Step
	for _, ok := range []bool{true, false} {
		if s.Unknown || s.OK == ok {
			t := s
			t.OK = ok
			out = append(out, t)
		}
	}
	if s.Op != Abort {
		return out
	}
	var both []Step
	for _, t := range out {
		for _, op := range []Op{Release, EndLease} {
			t.Op = op
			both = append(both, t)
		}
	}
	return both
}

// note keeps the failure that came after the longest placed prefix.
func (l *linearizer) note(cur State, placed []Step, s Step, err error) {
	if len(placed) < l.bestN || l.best.Why != "" && len(placed) == l.bestN {
		return
	}
	l.bestN = len(placed)
	l.best = Violation{Placed: append([]Step(nil), placed...), State: cur, Step: s, Why: err.Error()}
}

func (l *linearizer) key(cur State) string {
	var b strings.Builder
	for _, d := range l.done {
		if d {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	b.WriteString(cur.Kind + cur.Token.String())
	return b.String()
}
