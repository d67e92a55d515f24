package idemredis

import (
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemredis/internal/lua"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// The store's steps for internal/trace, emitted only while a test records
// (trace.On). Redis runs one script at a time, so each script commits
// inside the interval of its call, and the checker searches the orders
// those allow. A claim script judges and writes in one step: a first
// attempt is a trace.Claim (a new key or a record past its retention: the
// script does not say which), a later one a trace.Takeover of whatever
// token the record held, a refusal a trace.Read of a state without its
// token. A record Redis expired (its TTL) leaves no step: the trace
// judges no time, so the next claim may find it gone.

// traceScope names a record in traces: its key, prefix included.
func (k keys) traceScope() string { return "redis:" + k.record }

// emitRedis emits st on k, from start to now: unknown when err is one a
// script may have run before (no answer, or a WAIT that fell short).
func emitRedis(k keys, st trace.Step, start time.Time, err error) {
	st.Scope, st.Start, st.End = k.traceScope(), start, trace.Now()
	if err != nil && !errors.Is(err, server.ErrLeaseLost) && !errors.Is(err, redis.Nil) {
		st.OK, st.Unknown = false, true
	}
	trace.Emit(st)
}

// traceClaim emits a claim script's step from its verdict kind and the
// attempt number it granted (n).
func (f *fence) traceClaim(kind string, n int64, start time.Time, err error) {
	if !trace.On() || kind == "alg" {
		return
	}
	tok := uuid.MustParse(f.token)
	st := trace.Step{Op: trace.Claim, New: tok, OK: kind == "claimed"}
	switch {
	case kind == "claimed" && n > 1:
		st.Op = trace.Takeover
	case kind == "inflight":
		st = trace.Step{Op: trace.Read, Saw: trace.State{Kind: "running"}}
	case kind == "replay":
		st = trace.Step{Op: trace.Read, Saw: trace.State{Kind: "done"}}
	case kind == "unavailable":
		st = trace.Step{Op: trace.Read, Saw: trace.State{Kind: "unavailable"}}
	case kind == "uncertain":
		st = trace.Step{Op: trace.Read, Saw: trace.State{Kind: "uncertain"}}
	case err == nil && kind != "claimed": // mismatch: any record
		return
	}
	emitRedis(f.k, st, start, err)
}

// traceWrite emits a fenced script's step.
func (f *fence) traceWrite(sc *redis.Script, args []any, start time.Time, err error) {
	st := trace.Step{Token: uuid.MustParse(f.token), OK: err == nil}
	switch sc {
	case lua.Complete:
		st.Op, st.Wrote = trace.Complete, trace.State{Kind: args[0].(string)}
	case lua.Abort:
		st.Op = trace.EndLease
		if args[0] == "1" {
			st.Op = trace.Abort
		}
	case lua.Extend:
		st.Op = trace.Extend
	case lua.Checkpoint:
		st.Op = trace.Checkpoint
	case lua.Free:
		st.Op, st.Wrote = trace.Settle, trace.None
	case lua.Postpone:
		st.Op, st.Wrote = trace.Settle, trace.State{Kind: "running"}
	case lua.Uncertain:
		st.Op, st.Wrote = trace.Settle, trace.State{Kind: "uncertain"}
	default:
		return
	}
	emitRedis(f.k, st, start, err)
}

// traceResolve emits an operator's resolution of k from the script's
// reply kind: ok when it wrote state under token, refused on "not" or no
// record, unknown on an error (the script may have run).
func traceResolve(k keys, kind, state, token string, start time.Time, err error) {
	if trace.On() {
		emitRedis(k, trace.Step{Op: trace.Resolve, New: uuid.MustParse(token), OK: kind == "ok",
			Wrote: trace.State{Kind: state}}, start, err)
	}
}

// completeDurable is whether a completion waits for the replicas: always,
// but with the fault trace.CompleteNotReplicated seeded.
func completeDurable() bool { return !trace.Seeded(trace.CompleteNotReplicated) }
