package server

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/fingerprint"
)

// Uncertain leaves the operation uncertain (see [UncertainSettler]).
func (f memFence) Uncertain(context.Context) error {
	return f.locked(func(rec *memRecord, _ time.Time) {
		rec.state, rec.lockedUntil, rec.reconcileAt = stateUncertain, time.Time{}, time.Time{}
	})
}

// Resolve settles an uncertain operation under the store's lock (see
// [Resolver]).
func (m *MemoryStore) Resolve(ctx context.Context, op Operation, r Resolution) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	scope := fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key)
	rec := m.recs[scope]
	now := m.now()
	if rec == nil || rec.state != stateUncertain {
		m.traceResolve(scope, rec, false)
	}
	switch {
	case rec == nil:
		return Record{}, fmt.Errorf("%w (%s)", ErrUnknownKey, describe(op))
	case rec.state != stateUncertain:
		return rec.record(now), fmt.Errorf("%w: it is %s (%s)", ErrNotUncertain, rec.state, describe(op))
	}
	rec.token = uuid.New()
	rec.resolved = &Resolved{By: r.By, Reason: r.Reason, At: now, Applied: r.Applied}
	if r.Applied {
		rec.state, rec.expiresAt = stateDone, later(rec.expiresAt, now.Add(r.Retention))
		rec.resp, _ = r.Response.MarshalBinary() // never fails
	} else {
		rec.state, rec.expiresAt = stateNotApplied, now
		m.noteExpiry(now)
	}
	m.traceResolve(scope, rec, true)
	return rec.record(now), nil
}
