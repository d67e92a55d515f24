package testserver

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// The violations [Check] finds. Each [Violation] unwraps to one of them, so
// errors.Is(report.Err(), ErrDoubleEffect) tells whether a run had a double
// effect.
var (
	// ErrDoubleEffect: an operation took effect more than once.
	ErrDoubleEffect = errors.New("testserver: operation took effect more than once")
	// ErrLostOK: the client was told ok, but the operation took no effect.
	ErrLostOK = errors.New("testserver: ok outcome without an effect")
	// ErrWrongResult: the client was told ok with a result other than the
	// effect's.
	ErrWrongResult = errors.New("testserver: ok outcome with a different result than the effect")
	// ErrFailedApplied: the client was told the operation definitely
	// failed, but it took effect.
	ErrFailedApplied = errors.New("testserver: definite failure that took effect")
	// ErrOrphanEffect: an effect that no operation of the history claims.
	ErrOrphanEffect = errors.New("testserver: effect without an operation")
)

// Violation is one broken promise found by [Check]. It is an error that
// unwraps to its Kind.
type Violation struct {
	// Kind is one of [ErrDoubleEffect], [ErrLostOK], [ErrWrongResult],
	// [ErrFailedApplied], [ErrOrphanEffect].
	Kind error
	// Op is the operation id.
	Op string
	// Detail gives the evidence (counts, results, the client's error).
	Detail string
}

// Error describes the violation.
func (v Violation) Error() string {
	return fmt.Sprintf("%v: op %q: %s", v.Kind, v.Op, v.Detail)
}

// Unwrap returns v.Kind.
func (v Violation) Unwrap() error { return v.Kind }

// Unresolved is an unknown outcome and how it really ended.
type Unresolved struct {
	// Op is the operation id.
	Op string
	// Effects is how many times it took effect (0 or 1; 2 or more is also
	// an [ErrDoubleEffect] violation).
	Effects int
	// Detail is the client's error.
	Detail string
}

// Report is the result of [Check]: counts for programs, Violations and
// Unknowns for detail, String for people. The zero Report is a run with
// nothing in it.
type Report struct {
	// Operations counts the outcomes in the history, by kind in OK,
	// Failed and Unknown.
	Operations, OK, Failed, Unknown int
	// Effects counts every effect in the ledger; Applied counts the
	// operations with at least one.
	Effects, Applied int
	// DoubleEffects counts operations that took effect more than once,
	// ExtraEffects the effects beyond the first of each.
	DoubleEffects, ExtraEffects int
	// LostOKs, WrongResults, FailedApplied and OrphanEffects count the
	// other violations by kind.
	LostOKs, WrongResults, FailedApplied, OrphanEffects int
	// UnknownApplied and UnknownNotApplied split the unknown outcomes by
	// how they ended.
	UnknownApplied, UnknownNotApplied int
	// Violations lists every violation, sorted by operation id.
	Violations []Violation
	// Unknowns lists every unknown outcome, sorted by operation id.
	Unknowns []Unresolved
}

// Check compares what took effect (ledger) with what the client concluded
// (history). It reports a violation when an operation took effect more
// than once, when an ok outcome has no effect or another result (results
// are compared when both are non-empty), when a definite failure took
// effect, and when an effect belongs to no operation of the history
// (including effects recorded with an empty id). Unknown outcomes are
// reported with how each ended, never as violations. Either argument may
// be nil (empty).
func Check(ledger *Ledger, history *History) Report {
	if ledger == nil {
		ledger = &Ledger{}
	}
	if history == nil {
		history = &History{}
	}
	var r Report
	all := ledger.Effects() // one snapshot, so that both passes see the same effects
	effects := make(map[string]Effect, len(all))
	for _, e := range all {
		effects[e.Op] = e
		r.Effects += e.Count
		r.Applied++
		if e.Count > 1 {
			r.ExtraEffects += e.Count - 1
			r.add(Violation{ErrDoubleEffect, e.Op, fmt.Sprintf("took effect %d times, results %q", e.Count, e.Results)})
		}
	}
	claimed := make(map[string]bool)
	for _, o := range history.Outcomes() {
		claimed[o.Op] = true
		r.checkOutcome(o, effects[o.Op])
	}
	for _, e := range all {
		if e.Op == "" || !claimed[e.Op] {
			r.add(Violation{ErrOrphanEffect, e.Op, fmt.Sprintf("took effect %d times, results %q, and the history has no such operation", e.Count, e.Results)})
		}
	}
	// Stable: within an op, the order of discovery is kept.
	sort.SliceStable(r.Violations, func(i, j int) bool { return r.Violations[i].Op < r.Violations[j].Op })
	return r
}

// checkOutcome checks one client outcome against the effects of its
// operation.
func (r *Report) checkOutcome(o Outcome, e Effect) {
	r.Operations++
	switch o.Kind {
	case OutcomeOK:
		r.OK++
		switch {
		case e.Count == 0:
			r.add(Violation{ErrLostOK, o.Op, fmt.Sprintf("client got ok with result %q, no effect recorded", o.Result)})
		case e.Count == 1 && o.Result != "" && e.Results[0] != "" && o.Result != e.Results[0]:
			r.add(Violation{ErrWrongResult, o.Op, fmt.Sprintf("client got result %q, the effect's result is %q", o.Result, e.Results[0])})
		}
	case OutcomeFailed:
		r.Failed++
		if e.Count > 0 {
			r.add(Violation{ErrFailedApplied, o.Op, fmt.Sprintf("client got a definite failure (%s), but it took effect %d times", o.Detail, e.Count)})
		}
	default:
		r.Unknown++
		r.Unknowns = append(r.Unknowns, Unresolved{Op: o.Op, Effects: e.Count, Detail: o.Detail})
		if e.Count > 0 {
			r.UnknownApplied++
		} else {
			r.UnknownNotApplied++
		}
	}
}

// add appends v and counts it by kind.
func (r *Report) add(v Violation) {
	r.Violations = append(r.Violations, v)
	switch v.Kind {
	case ErrDoubleEffect:
		r.DoubleEffects++
	case ErrLostOK:
		r.LostOKs++
	case ErrWrongResult:
		r.WrongResults++
	case ErrFailedApplied:
		r.FailedApplied++
	case ErrOrphanEffect:
		r.OrphanEffects++
	}
}

// Err returns nil when the run kept every promise, else an error joining
// every violation (errors.Is works with each kind).
func (r Report) Err() error {
	errs := make([]error, len(r.Violations))
	for i, v := range r.Violations {
		errs[i] = v
	}
	return errors.Join(errs...)
}

// maxListed bounds the violations and unknown outcomes String lists.
const maxListed = 20

// String renders the report for people: counts, then up to 20 violations
// and 20 unknown outcomes.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operations: %d (ok %d, failed %d, unknown %d)\n", r.Operations, r.OK, r.Failed, r.Unknown)
	fmt.Fprintf(&b, "effects: %d on %d operations\n", r.Effects, r.Applied)
	fmt.Fprintf(&b, "unknown outcomes: %d took effect, %d did not\n", r.UnknownApplied, r.UnknownNotApplied)
	fmt.Fprintf(&b, "violations: %d (double effects %d, extra effects %d, lost oks %d, wrong results %d, failed but applied %d, orphan effects %d)\n",
		len(r.Violations), r.DoubleEffects, r.ExtraEffects, r.LostOKs, r.WrongResults, r.FailedApplied, r.OrphanEffects)
	for i, v := range r.Violations {
		if i == maxListed {
			fmt.Fprintf(&b, "  ... and %d more violations\n", len(r.Violations)-maxListed)
			break
		}
		fmt.Fprintf(&b, "  %v\n", v)
	}
	for i, u := range r.Unknowns {
		if i == maxListed {
			fmt.Fprintf(&b, "  ... and %d more unknown outcomes\n", len(r.Unknowns)-maxListed)
			break
		}
		fmt.Fprintf(&b, "  unknown %q: took effect %d times (client: %s)\n", u.Op, u.Effects, u.Detail)
	}
	return b.String()
}
