package trace

import (
	"fmt"

	"github.com/google/uuid"
)

// The model's transitions over State, one per statement of idem.pml
// (each names its inline). The model's guards on time (a lease live, a
// retention passed) are not judged: a trace carries no clock the model
// shares, so a step that the store refused, or a claim that time allowed,
// is taken as the model's "else" branch or its time guard held. Every
// guard on the record's state and token is judged, both ways for the
// fenced writes, whose guards have no time in them: a fenced write takes
// effect exactly when the record is running under its token
// (FENCE_WHERE, COMPLETE_WHERE, SETTLE_WHERE), and an operator's
// resolution exactly when the record is uncertain. An uncertain record is
// never reclaimed, swept or taken over (uncertain_kept): a store that did
// any of these is refused whatever the time. model_test.go holds these
// equal to idem.pml: every event sequence spin generates from the model
// passes, and each token mutant's counterexample fails.

// fenced is the guard of a fenced write: the record runs under tok.
func fenced(cur State, s Step) bool {
	return cur.Kind == "running" && cur.Token == s.Token
}

// apply returns the state after s, taken to have had effect as s.OK says,
// or an error saying why the model forbids it from cur.
func apply(cur State, s Step) (State, error) {
	switch s.Op {
	case Read:
		if s.Saw.Kind != cur.Kind || (cur.Kind != "none" && s.Saw.Token != uuid.Nil && s.Saw.Token != cur.Token) {
			return cur, fmt.Errorf("read %v, but the record is %v", s.Saw, cur)
		}
		return cur, nil
	case Insert: // sqlInsert: ON CONFLICT DO NOTHING
		if s.OK != (cur.Kind == "none") {
			return cur, fmt.Errorf("insert ok=%v on a record %v", s.OK, cur)
		}
		return claimed(cur, s), nil
	case Claim: // sqlInsert or sqlReclaim: time not judged, either may hold
		if s.OK && cur.Kind == "uncertain" {
			return cur, fmt.Errorf("claim of a record %v", cur)
		}
		return claimed(cur, s), nil
	case Reclaim, Sweep, Evict: // sqlReclaim, sqlSweep: a record whose retention passed
		if s.OK && cur.Kind == "none" {
			return cur, fmt.Errorf("%s of an absent record", s.Op)
		}
		if s.OK && s.Op != Evict && cur.Kind == "uncertain" { // uncertain kept
			return cur, fmt.Errorf("%s of a record %v", s.Op, cur)
		}
		if s.Op == Reclaim {
			return claimed(cur, s), nil
		}
		if s.OK {
			return None, nil
		}
		return cur, nil
	case Takeover, Take: // sqlTakeover (its read token), sqlTakeAbandoned
		if s.OK && (cur.Kind != "running" || (s.Op == Takeover && s.Token != uuid.Nil && cur.Token != s.Token)) {
			return cur, fmt.Errorf("%s by %s of a record %v", s.Op, short(s.Token), cur)
		}
		return claimed(cur, s), nil
	case Release: // sqlRelease: also first attempt, no recovery point
		if s.OK && !fenced(cur, s) {
			return cur, fmt.Errorf("release by %s of a record %v", short(s.Token), cur)
		}
		if s.OK {
			return None, nil
		}
		return cur, nil
	case Commit: // txCommit: the row is new, or the claim's transaction holds it
		if s.OK && ((s.Token == uuid.Nil) != (cur.Kind == "none") || cur.Kind == "uncertain") {
			return cur, fmt.Errorf("commit (new key: %v) on a record %v", s.Token == uuid.Nil, cur)
		}
		if s.OK {
			return State{Kind: s.Wrote.Kind, Token: s.New}, nil
		}
		return cur, nil
	case Complete, Extend, Checkpoint, EndLease, Settle, Fenced:
		return applyFenced(cur, s)
	case Resolve: // Operator: applied or not, fenced by the state
		if s.OK != (cur.Kind == "uncertain") {
			return cur, fmt.Errorf("resolve ok=%v on a record %v", s.OK, cur)
		}
		if s.OK {
			return State{Kind: s.Wrote.Kind, Token: s.New}, nil
		}
		return cur, nil
	}
	return cur, fmt.Errorf("unknown step %q", s.Op)
}

// applyFenced is a fenced write: it takes effect exactly when the record
// runs under its token.
func applyFenced(cur State, s Step) (State, error) {
	if s.OK != fenced(cur, s) {
		if s.OK {
			return cur, fmt.Errorf("%s by %s took effect on a record %v: a stale token wrote", s.Op, short(s.Token), cur)
		}
		return cur, fmt.Errorf("%s by %s refused on a record %v that it holds", s.Op, short(s.Token), cur)
	}
	if !s.OK || s.Wrote.Kind == "" { // Extend, Checkpoint, EndLease: the state stays
		return cur, nil
	}
	next := s.Wrote
	if next.Kind != "none" {
		next.Token = cur.Token
	}
	return next, nil
}

// claimed is the state after a claim or take: running under its new token.
func claimed(cur State, s Step) State {
	if !s.OK {
		return cur
	}
	return State{Kind: "running", Token: s.New}
}
