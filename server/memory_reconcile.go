package server

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
)

// TakeAbandoned takes over the abandoned [Leased] records of routes, oldest
// lease first, as [PostgresStore]'s does.
func (m *MemoryStore) TakeAbandoned(ctx context.Context, routes []string, lease time.Duration, limit int) ([]*Taken, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	type due struct {
		scope [32]byte
		rec   *memRecord
	}
	var found []due
	for scope, rec := range m.recs {
		if rec.abandoned(now) && slices.Contains(routes, rec.op.Route) {
			found = append(found, due{scope, rec})
		}
	}
	slices.SortFunc(found, func(a, b due) int { return a.rec.lockedUntil.Compare(b.rec.lockedUntil) })
	var out []*Taken
	for _, d := range found[:min(limit, len(found))] {
		rec := d.rec
		rec.token, rec.attempt = uuid.New(), rec.attempt+1
		m.traceTake(d.scope, rec)
		rec.lockedUntil, rec.reconcileAt = now.Add(lease), time.Time{}
		rec.expiresAt = later(rec.expiresAt, now.Add(2*lease))
		t := &Taken{Operation: rec.op, Request: rec.request, Age: now.Sub(rec.createdAt),
			Settler: memFence{m: m, scope: d.scope, token: rec.token}}
		t.Attempt = rec.attempt
		if rec.point != nil {
			t.Recovery = *rec.point
		}
		out = append(out, t)
	}
	return out, nil
}

// abandoned reports a [Leased] record whose lease ended, due for a
// reconciler, within its retention.
func (r *memRecord) abandoned(now time.Time) bool {
	return r.state == stateRunning && r.mode == Leased && !r.lockedUntil.After(now) &&
		!r.reconcileAt.After(now) && r.expiresAt.After(now)
}

func (f memFence) Free(context.Context) error {
	return f.locked(func(*memRecord, time.Time) { delete(f.m.recs, f.scope) })
}

func (f memFence) Postpone(_ context.Context, wait time.Duration) error {
	return f.locked(func(rec *memRecord, now time.Time) {
		rec.lockedUntil, rec.reconcileAt = now, now.Add(wait)
	})
}
