package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/trace"
)

// ReadRecord returns the record of op's scope (see [RecordStore]).
func (m *MemoryStore) ReadRecord(ctx context.Context, op Operation, payload bool) (Record, error) {
	rec, found, err := m.readScope(ctx, fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key), payload)
	if err == nil && !found {
		err = fmt.Errorf("%w (%s)", ErrUnknownKey, describe(op))
	}
	return rec, err
}

// ReadRef returns the record whose scope hash is scope (see [RefReader]).
func (m *MemoryStore) ReadRef(ctx context.Context, scope [32]byte, payload bool) (Record, error) {
	rec, found, err := m.readScope(ctx, scope, payload)
	if err == nil && !found {
		err = unknownRef(scope)
	}
	return rec, err
}

// readScope reads the record of scope; found is false when there is none.
func (m *MemoryStore) readScope(ctx context.Context, scope [32]byte, payload bool) (Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.recs[scope]
	if rec == nil {
		return Record{}, false, nil
	}
	out := rec.record(m.now())
	if payload {
		if err := rec.setPayload(&out); err != nil {
			return Record{}, false, err
		}
	}
	return out, true, nil
}

// ListRunning returns a page of running records (see [RecordStore]); it
// looks at every record, under the store's lock.
func (m *MemoryStore) ListRunning(ctx context.Context, q InFlightQuery) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	now := m.now()
	var out []Record
	for _, rec := range m.recs {
		if rec.state != stateRunning && rec.state != stateUncertain || q.Route != "" && rec.op.Route != q.Route {
			continue
		}
		r := rec.record(now)
		if (!q.Stuck || r.Stuck()) && comparePositions(positionOf(r), q.After) > 0 {
			out = append(out, r)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Record) int { return comparePositions(positionOf(a), positionOf(b)) })
	return out[:min(len(out), max(q.Limit, 0))], nil
}

// comparePositions orders positions by CreatedAt, then tenant, principal,
// route and key, as bytes.
func comparePositions(a, b Position) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.Tenant, b.Tenant),
		strings.Compare(a.Principal, b.Principal), strings.Compare(a.Route, b.Route), strings.Compare(a.Key, b.Key))
}

// DeleteRecord deletes the record of op's scope (see [RecordStore]), unless
// its lease is live or its [Transactional] attempt runs and force is false.
// A duplicate waiting for a Transactional attempt it deletes looks again,
// and claims the key.
func (m *MemoryStore) DeleteRecord(ctx context.Context, op Operation, force bool) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	scope := fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key)
	rec := m.recs[scope]
	if rec == nil {
		return Record{}, fmt.Errorf("%w (%s)", ErrUnknownKey, describe(op))
	}
	now := m.now()
	if rec.held(now) && !force {
		return rec.record(now), fmt.Errorf("%w (%s)", ErrLeaseLive, describe(op))
	}
	m.traceGone(trace.Evict, scope)
	delete(m.recs, scope)
	if rec.state == stateRunning && rec.done != nil {
		close(rec.done)
	}
	return rec.record(now), nil
}

// CountRecords counts the records (see [RecordCounts]), exactly; it looks
// at every record, under the store's lock.
func (m *MemoryStore) CountRecords(ctx context.Context) (RecordCounts, error) {
	if err := ctx.Err(); err != nil {
		return RecordCounts{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	c := RecordCounts{Records: int64(len(m.recs)), RecordsAre: CountExact}
	for _, rec := range m.recs {
		if rec.state != stateRunning {
			continue
		}
		age := now.Sub(rec.createdAt)
		c.Running++
		c.OldestRunning = max(c.OldestRunning, age)
		if rec.record(now).Stuck() {
			c.Stuck++
			c.OldestStuck = max(c.OldestStuck, age)
		}
	}
	return c, nil
}

// FindKey returns the records of key in every scope (see [RecordStore]);
// it looks at every record, under the store's lock.
func (m *MemoryStore) FindKey(ctx context.Context, key string, limit int) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	now := m.now()
	var out []Record
	for _, rec := range m.recs {
		if rec.op.Key == key {
			out = append(out, rec.record(now))
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Record) int { return comparePositions(positionOf(a), positionOf(b)) })
	return out[:min(len(out), max(limit, 0))], nil
}

// record is r as an operator sees it at now, without payload.
func (r *memRecord) record(now time.Time) Record {
	out := Record{Operation: r.op, State: string(r.state), Mode: r.mode, CreatedAt: r.createdAt,
		ExpiresAt: r.expiresAt, ReconcileAt: r.reconcileAt, FingerprintAlg: r.fpAlg, ReadAt: now}
	out.Attempt, out.Resolved = r.attempt, r.resolved
	if r.state == stateRunning && r.mode == Leased {
		out.LeaseEnds = r.lockedUntil
	}
	if res, err := r.response(); err == nil && res != nil {
		out.Status = res.Status // the store's own form: never an error
	}
	if r.point != nil {
		out.Recovery = &Recovery{Point: r.point.Point, Data: r.point.Data}
	}
	return out
}

// setPayload adds r's stored request and response to out.
func (r *memRecord) setPayload(out *Record) error {
	if r.request != nil {
		req, err := decodeStoredRequest(r.request)
		if err != nil {
			return err
		}
		out.Request = req
	}
	res, err := r.response()
	if err != nil {
		return err
	}
	if res != nil {
		out.Header, out.Body = res.Header, res.Body
	}
	return nil
}
