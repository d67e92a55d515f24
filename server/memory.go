package server

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/trace"
)

// MemoryStore keeps idempotency records in process memory: the default for
// demos, single-process services and tests. It follows the [PostgresStore]'s
// rules except that it cannot join a database transaction: in
// [Transactional] mode the claim is held in memory, a duplicate waits for it
// up to the wait bound and then replays or gets 409, and a 5xx or a panic
// releases the key. Its records die with the process. It deletes a few
// expired records each time it inserts one, and Sweep deletes more. It is
// safe for concurrent use.
type MemoryStore struct {
	mu   sync.Mutex
	now  func() time.Time // the store's clock; tests inject one
	recs map[[32]byte]*memRecord
	// soonest is at or before every record's expiresAt while recs is not
	// empty: an insert before it has no expired record to sweep.
	soonest time.Time
	// waiting, when set, is called with +1 as a duplicate starts waiting
	// for a running attempt and -1 as the wait ends; tests use it to know
	// the wait path is taken.
	waiting func(delta int)
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{now: time.Now, recs: make(map[[32]byte]*memRecord)}
}

// lazySweep is how many records an insert looks at for expired ones.
const lazySweep = 8

type memRecord struct {
	op          Operation // Attempt unused: see attempt
	request     []byte    // Leased mode: encodeRequest's form
	createdAt   time.Time
	reconcileAt time.Time // Leased mode: when a reconciler looks at it next
	fpAlg       string
	fp          []byte
	state       recordState
	mode        Mode
	token       uuid.UUID
	attempt     int
	lockedUntil time.Time // Leased mode
	point       *Recovery // the last recovery point recorded, or nil
	resp        []byte    // the stored response: Response.MarshalBinary's form
	expiresAt   time.Time
	done        chan struct{} // Transactional mode: closed when the attempt ends; made by the first claim that waits
	resolved    *Resolved     // who resolved it, when an operator did
}

func (r *memRecord) found(now time.Time) (*found, error) {
	f := &found{
		fpAlg: r.fpAlg, fp: r.fp, state: r.state, token: r.token,
		expired:   !now.Before(r.expiresAt),
		open:      r.state == stateRunning && r.mode == Transactional,
		leaseLeft: r.lockedUntil.Sub(now),
		expiresAt: r.expiresAt,
	}
	var err error
	f.resp, err = r.response()
	return f, err
}

// response decodes the stored response: nil when there is none. Each call
// gives a response of its own, which a replay may hand to a ResponseWriter.
func (r *memRecord) response() (*Response, error) {
	if r.resp == nil {
		return nil, nil
	}
	res := &Response{}
	if err := res.UnmarshalBinary(r.resp); err != nil {
		return nil, err
	}
	return res, nil
}

// held reports a record that a sweep must keep whatever its expiry: a
// [Transactional] attempt runs, or a lease is live.
func (r *memRecord) held(now time.Time) bool {
	return r.state == stateRunning && (r.mode == Transactional || r.lockedUntil.After(now))
}

// Claim judges and claims c's record under the store's mutex, waiting
// ([Transactional]) for a running attempt of the scope, at most c.Wait.
func (m *MemoryStore) Claim(ctx context.Context, c *Claim) (ClaimResult, error) {
	var timeout *time.Timer // started by the first wait: the bound covers all of them
	for {
		res, wait, err := m.tryClaim(c)
		if err != nil {
			return ClaimResult{}, err
		}
		if wait == nil {
			res.Waited = timeout != nil
			return res, nil
		}
		if c.Wait <= 0 {
			return inFlight(0), nil
		}
		if timeout == nil {
			timeout = time.NewTimer(c.Wait)
			defer timeout.Stop()
		}
		bound, err := m.await(ctx, wait, timeout.C)
		if err != nil {
			return ClaimResult{}, err
		}
		if bound {
			res := inFlight(0)
			res.Waited = true
			return res, nil
		}
	}
}

// await waits for the running attempt's end (false) or the bound (true).
func (m *MemoryStore) await(ctx context.Context, wait <-chan struct{}, bound <-chan time.Time) (bool, error) {
	if m.waiting != nil {
		m.waiting(1)
		defer m.waiting(-1)
	}
	select {
	case <-wait: // the running attempt ended: look again
		return false, nil
	case <-bound:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// tryClaim claims, judges or, for a running [Transactional] attempt, returns
// the channel to wait on.
func (m *MemoryStore) tryClaim(c *Claim) (ClaimResult, <-chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	rec := m.recs[c.Scope]
	if rec == nil {
		return m.insert(c, now), nil, nil
	}
	f, err := rec.found(now)
	if err != nil {
		return ClaimResult{}, nil, err
	}
	switch v := decide(f, c); v {
	case vReclaim:
		return m.insert(c, now), nil, nil
	case vWait:
		m.traceRead(c.Scope, rec)
		if rec.done == nil { // the first to wait makes it
			rec.done = make(chan struct{})
		}
		return ClaimResult{}, rec.done, nil
	case vTakeover:
		old := rec.token
		rec.token = uuid.New()
		m.traceTakeover(c.Scope, old, rec)
		rec.attempt++
		rec.lockedUntil = now.Add(c.Lease)
		rec.expiresAt = later(rec.expiresAt, now.Add(c.Retention))
		g := grant{attempt: rec.attempt, recovery: &Recovery{}}
		if rec.point != nil {
			g.recovery = &Recovery{Point: rec.point.Point, Data: rec.point.Data}
		}
		return m.claimed(c, rec, g), nil, nil
	default:
		m.traceRead(c.Scope, rec)
		return f.result(v), nil, nil
	}
}

func (m *MemoryStore) insert(c *Claim, now time.Time) ClaimResult {
	if !now.Before(m.soonest) {
		m.sweepLocked(now, lazySweep, lazySweep)
	}
	rec := &memRecord{
		op:      Operation{Tenant: c.Tenant, Principal: c.Principal, Route: c.Route, Key: c.Key},
		request: c.Request, createdAt: now,
		fpAlg: c.DigestAlg, fp: c.Digest, state: stateRunning, mode: c.Mode,
		token: uuid.New(), attempt: 1, expiresAt: now.Add(c.Retention),
	}
	if c.Mode == Leased {
		rec.lockedUntil = now.Add(c.Lease)
	}
	m.traceInsert(c.Scope, rec)
	m.put(c.Scope, rec)
	return m.claimed(c, rec, grant{attempt: 1})
}

func (m *MemoryStore) claimed(c *Claim, rec *memRecord, g grant) ClaimResult {
	f := memFence{m: m, scope: c.Scope, token: rec.token}
	if c.Mode == Leased {
		return ClaimResult{Verdict: VerdictClaimed, Attempt: &leasedAttempt{fence: f, g: g}}
	}
	return ClaimResult{Verdict: VerdictClaimed, Attempt: memTxAttempt{f}}
}

// put keeps rec as scope's record.
func (m *MemoryStore) put(scope [32]byte, rec *memRecord) {
	m.noteExpiry(rec.expiresAt)
	m.recs[scope] = rec
}

// noteExpiry keeps soonest at or before t, a record's new expiry; an
// expiry that only grows (later) needs no note.
func (m *MemoryStore) noteExpiry(t time.Time) {
	if len(m.recs) == 0 || t.Before(m.soonest) {
		m.soonest = t
	}
}

// Sweep deletes at most limit records whose retention has passed; it skips
// records whose [Transactional] attempt still runs.
func (m *MemoryStore) Sweep(ctx context.Context, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sweepLocked(m.now(), limit, len(m.recs)), nil
}

// sweepLocked deletes up to limit expired records among at most scan of
// them (Go's map order makes a partial scan start at random). A scan that
// looked at every record sets soonest to the soonest expiry of those
// kept.
func (m *MemoryStore) sweepLocked(now time.Time, limit, scan int) int {
	deleted, whole := 0, true
	var soonest time.Time
	for scope, rec := range m.recs {
		if deleted >= limit || scan <= 0 {
			whole = false
			break
		}
		scan--
		if !now.Before(rec.expiresAt) && !rec.held(now) && rec.state != stateUncertain {
			m.traceGone(trace.Sweep, scope)
			delete(m.recs, scope)
			deleted++
		} else if soonest.IsZero() || rec.expiresAt.Before(soonest) {
			soonest = rec.expiresAt
		}
	}
	if whole {
		m.soonest = soonest
	}
	return deleted
}

// memFence runs an attempt's token-fenced operations.
type memFence struct {
	m     *MemoryStore
	scope [32]byte
	token uuid.UUID
}

// locked runs f on the attempt's record, or returns [ErrLeaseLost] when the
// record is gone or belongs to another attempt.
func (f memFence) locked(op func(rec *memRecord, now time.Time)) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	rec := f.m.recs[f.scope]
	if rec == nil || rec.token != f.token || rec.state != stateRunning {
		f.trace(false)
		return ErrLeaseLost
	}
	op(rec, f.m.now())
	f.trace(true)
	return nil
}

func (f memFence) Extend(_ context.Context, d, margin time.Duration) error {
	return f.locked(func(rec *memRecord, now time.Time) {
		rec.lockedUntil = now.Add(d)
		rec.expiresAt = later(rec.expiresAt, rec.lockedUntil.Add(margin))
	})
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (f memFence) Checkpoint(_ context.Context, point string, data []byte) error {
	return f.locked(func(rec *memRecord, _ time.Time) { rec.point = &Recovery{Point: point, Data: data} })
}

func (f memFence) Complete(_ context.Context, res *Response) error {
	stored, _ := res.MarshalBinary() // never fails
	return f.locked(func(rec *memRecord, _ time.Time) {
		rec.state, rec.resp, rec.lockedUntil = res.state(), stored, time.Time{}
		if rec.done != nil {
			close(rec.done)
		}
	})
}

// abort releases the key ([Transactional]; or [Leased], for a refused first
// attempt that recorded no recovery point) or ends the lease now.
func (f memFence) Abort(_ context.Context, reject bool) error {
	return f.locked(func(rec *memRecord, now time.Time) {
		release := rec.mode == Transactional || (reject && rec.attempt == 1 && rec.point == nil)
		if !release {
			rec.lockedUntil = now
			return
		}
		delete(f.m.recs, f.scope)
		if rec.done != nil {
			close(rec.done)
		}
	})
}

// memTxAttempt is a [Transactional] claim held in memory: no transaction.
type memTxAttempt struct{ memFence }

func (a memTxAttempt) Number() int { return 1 }

func (memTxAttempt) inMemory() {}

// inMemory is an [Attempt] whose Complete and Abort take the store's mutex
// and return, never blocking nor reading their context: the runner gives
// them no timeout.
type inMemory interface{ inMemory() }
