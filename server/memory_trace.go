package server

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/trace"
)

// MemoryStore's steps for internal/trace, emitted only while a test
// records (trace.On). Each is emitted under the store's mutex, which
// orders every step of the store: the emitted order is the commit order,
// and the steps' intervals (a point each) never overlap.

// memStep emits st on scope, stamped now.
func (m *MemoryStore) memStep(scope [32]byte, st trace.Step) {
	now := trace.Now()
	st.Scope, st.Start, st.End = fmt.Sprintf("mem:%p:%x", m, scope[:8]), now, now
	trace.Emit(st)
}

// memState is rec's state for a trace; nil is none.
func memState(rec *memRecord) trace.State {
	if rec == nil {
		return trace.None
	}
	return trace.State{Kind: string(rec.state), Token: rec.token}
}

// traceRead emits a claim's judgement of rec that claimed nothing.
func (m *MemoryStore) traceRead(scope [32]byte, rec *memRecord) {
	if trace.On() {
		m.memStep(scope, trace.Step{Op: trace.Read, Saw: memState(rec)})
	}
}

// traceInsert emits the claim of rec, new or over an expired record.
func (m *MemoryStore) traceInsert(scope [32]byte, rec *memRecord) {
	if !trace.On() {
		return
	}
	op := trace.Insert
	if m.recs[scope] != nil {
		op = trace.Reclaim
	}
	m.memStep(scope, trace.Step{Op: op, New: rec.token, OK: true})
}

// traceTakeover emits the takeover of rec, whose token was old.
func (m *MemoryStore) traceTakeover(scope [32]byte, old uuid.UUID, rec *memRecord) {
	if trace.On() {
		m.memStep(scope, trace.Step{Op: trace.Takeover, Token: old, New: rec.token, OK: true})
	}
}

// traceTake emits the reconciler's take of rec.
func (m *MemoryStore) traceTake(scope [32]byte, rec *memRecord) {
	if trace.On() {
		m.memStep(scope, trace.Step{Op: trace.Take, New: rec.token, OK: true})
	}
}

// traceGone emits the deletion of a record by a sweep or an eviction.
func (m *MemoryStore) traceGone(op trace.Op, scope [32]byte) {
	if trace.On() {
		m.memStep(scope, trace.Step{Op: op, OK: true})
	}
}

// trace emits a fenced write, with what it left when it took effect.
func (f memFence) trace(ok bool) {
	if trace.On() {
		f.m.memStep(f.scope, trace.Step{Op: trace.Fenced, Token: f.token, OK: ok, Wrote: memState(f.m.recs[f.scope])})
	}
}

// traceResolve emits an operator's resolution of rec, with what it left
// when it took effect.
func (m *MemoryStore) traceResolve(scope [32]byte, rec *memRecord, ok bool) {
	if !trace.On() {
		return
	}
	st := trace.Step{Op: trace.Resolve, OK: ok}
	if ok {
		st.New, st.Wrote = rec.token, memState(rec)
	}
	m.memStep(scope, st)
}
