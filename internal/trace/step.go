package trace

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Op names a step of a record's lifecycle.
type Op string

// The steps, after idem.pml's events (EV lines) and statements.
const (
	// Insert claims an absent key (sqlInsert): ok when it wrote the record.
	Insert Op = "insert"
	// Read reads the record (sqlRead): Saw is what it found.
	Read Op = "read"
	// Claim is a first attempt's claim by a store that cannot tell a new
	// key from a record whose retention passed (idemredis: one script
	// judges and writes): an Insert or a Reclaim.
	Claim Op = "claim"
	// Reclaim claims a record whose retention passed (sqlReclaim).
	Reclaim Op = "reclaim"
	// Takeover takes over an ended lease held by Token (sqlTakeover).
	Takeover Op = "takeover"
	// Complete stores a response, fenced by Token (sqlComplete).
	Complete Op = "complete"
	// Abort is a refused attempt's abort that either freed the key or
	// ended the lease (idemredis does not say which): a Release or an
	// EndLease.
	Abort Op = "abort"
	// Release frees the key of a refused first attempt (sqlRelease).
	Release Op = "release"
	// EndLease ends the lease of Token's attempt (sqlEndLease).
	EndLease Op = "endlease"
	// Extend and Checkpoint are an attempt's other fenced writes.
	Extend     Op = "extend"
	Checkpoint Op = "checkpoint"
	// Fenced is a fenced write of MemoryStore, whose writes share one
	// guard: Wrote is what it left.
	Fenced Op = "fenced"
	// Take is the reconciler's take of an abandoned operation.
	Take Op = "take"
	// Settle is the reconciler's fenced settlement (complete, free,
	// postpone, park or leave uncertain): Wrote says which.
	Settle Op = "settle"
	// Resolve is an operator's resolution of an uncertain operation
	// (sqlResolve), fenced by the state: Wrote is done (applied) or
	// not-applied, under the new token New.
	Resolve Op = "resolve"
	// Commit is a Transactional attempt's commit (txCommit): it writes the
	// record done under New, a new key's (Token nil) or a reclaimed
	// expired record's (Token is New); its claim's statements are not
	// steps, being uncommitted until then.
	Commit Op = "commit"
	// Sweep deletes an expired record.
	Sweep Op = "sweep"
	// Evict is the operator's deletion of a record.
	Evict Op = "evict"
)

// State is a record's state as the model abstracts it: whether there is
// one, its state, and its fencing token.
type State struct {
	// Kind is "none", "running", "done", "unavailable", "uncertain" or
	// "not-applied".
	Kind  string
	Token uuid.UUID
}

// None is the state of an absent record.
var None = State{Kind: "none"}

func (s State) String() string {
	if s.Kind == "none" || s.Kind == "" {
		return "none"
	}
	return fmt.Sprintf("%s(%s)", s.Kind, s.Token.String()[:8])
}

// Step is one step a store performed on one scope.
type Step struct {
	// Scope identifies the record: the store's table or keyspace and the
	// scope's hash, so that two stores on one table share their scopes.
	Scope string
	Op    Op
	// Token is the token the step acted with: an attempt's, or the one a
	// takeover read (nil: the store read and replaced it in one atomic
	// step, as idemredis's claim script does).
	Token uuid.UUID
	// New is the token a claim (Insert, Reclaim, Takeover) or a Take wrote.
	New uuid.UUID
	// OK is whether the store reports the step took effect.
	OK bool
	// Unknown is set when the store got no answer (the connection broke):
	// the step may or may not have taken effect.
	Unknown bool
	// Saw is what a Read found (a nil token: the store did not say which).
	Saw State
	// Wrote is what an OK step left: a Settle's, Complete's or Release's
	// outcome (done, unavailable, running after a postpone, none).
	Wrote State
	// Start and End bound the step's commit.
	Start, End time.Time
}

func (s Step) String() string {
	r := "refused"
	switch {
	case s.Unknown:
		r = "unknown"
	case s.OK:
		r = "ok"
	}
	out := fmt.Sprintf("%s %s tok=%s", s.Op, r, s.Token.String()[:8])
	if s.New != uuid.Nil {
		out += " new=" + s.New.String()[:8]
	}
	if s.Op == Read {
		out += " saw=" + s.Saw.String()
	}
	if s.OK && s.Wrote.Kind != "" {
		out += " wrote=" + s.Wrote.String()
	}
	return out
}
