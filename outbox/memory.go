package outbox

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Memory is an outbox in process memory, for tests and demos: the same
// [Message], key derivation, delivery classification, retry, backoff and
// parking rules as [Outbox], without durability. Its messages die with the
// process, so it guarantees nothing across a crash: never use it where the
// data it notifies about is durable.
//
// [Memory.Enqueue] has no transaction: a message is committed when Enqueue
// returns. Call it where the caller's own change becomes visible (under
// the lock that makes it so), and not at all when the change is undone.
// It is safe for concurrent use.
type Memory struct {
	s      *settings
	share  *share // of its Workers among the destinations (one queue)
	mu     sync.Mutex
	msgs   map[int64]*memMsg
	byKey  map[string]int64
	ready  []int64 // due messages, in order
	nextID int64
	wake   chan struct{} // a token when ready is not empty
}

type memState int

const (
	memPending memState = iota
	memRunning
	memDelivered
	memParked
)

type memMsg struct {
	msg        Message
	state      memState
	attempts   int // deliveries made, ever
	rec        record
	enqueuedAt time.Time
	parkedAt   time.Time
	timer      *time.Timer // the wait for its next turn, nil when none
	// released: its destination took a delivery while its turn ran (a
	// turn that refused and held it, see refusals): when the turn ends,
	// it is due at once instead of after its backoff.
	released bool
}

// NewMemory returns an empty [Memory] outbox. The Postgres-only fields of
// cfg are ignored.
func NewMemory(cfg Config) *Memory {
	cfg.RescueAfter = 0
	s, _ := newSettings(cfg) // cannot fail without RescueAfter
	q := &Memory{s: s, share: s.newShare(), msgs: make(map[int64]*memMsg), byKey: make(map[string]int64), wake: make(chan struct{}, 1)}
	s.where = fmt.Sprintf("mem:%p", q)
	return q
}

// Enqueue stores m, due at once, and returns its ID. Like
// [Outbox.Enqueue], it derives an empty key from ctx's operation, is
// idempotent by key, and returns [ErrInvalidMessage] or [ErrKeyConflict].
func (q *Memory) Enqueue(ctx context.Context, m Message) (int64, error) {
	msg, err := prepare(ctx, m, q.s.keyHeader)
	if err != nil {
		return 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if id, ok := q.byKey[msg.Key]; ok {
		if !q.msgs[id].msg.same(&msg) {
			return 0, fmt.Errorf("%w: %s (message %d)", ErrKeyConflict, msg.Key, id)
		}
		return id, nil
	}
	q.nextID++
	id := q.nextID
	q.msgs[id] = &memMsg{msg: msg, enqueuedAt: q.s.now(), rec: record{Since: q.s.now()}}
	q.byKey[msg.Key] = id
	q.pushLocked(id)
	return id, nil
}

func (q *Memory) pushLocked(id int64) {
	q.ready = append(q.ready, id)
	q.signal()
}

// signal leaves a token for a worker waiting for a due message.
func (q *Memory) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Run delivers the due messages with [Config.Workers] goroutines until ctx
// is done, then waits up to [Config.StopTimeout] for the deliveries running
// (then cancels them: their messages stay due). It returns nil.
func (q *Memory) Run(ctx context.Context) error {
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(q.s.StopTimeout, cancel) })
	defer stop()
	var wg sync.WaitGroup
	for range q.s.Workers {
		wg.Go(func() { q.work(ctx, dctx) })
	}
	wg.Wait()
	return nil
}

// work delivers due messages until ctx is done.
func (q *Memory) work(ctx, dctx context.Context) {
	for {
		id, ok := q.next()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
				continue
			}
		}
		q.deliver(dctx, id)
		if ctx.Err() != nil {
			return
		}
	}
}

// next takes the next due message, marking it running.
func (q *Memory) next() (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ready) > 0 {
		id := q.ready[0]
		q.ready = q.ready[1:]
		if m := q.msgs[id]; m != nil && m.state == memPending {
			m.state = memRunning
			if len(q.ready) > 0 {
				q.signal() // for the other workers
			}
			return id, true
		}
	}
	return 0, false
}

// deliver takes one turn of message id (see dispatch) and applies it.
func (q *Memory) deliver(ctx context.Context, id int64) {
	q.mu.Lock()
	m := q.msgs[id]
	msg, win := m.msg, m.rec
	m.attempts++
	n := m.attempts - win.Base
	q.mu.Unlock()

	t := q.s.dispatch(ctx, q.share, id, &msg, n, win)
	if q.apply(m, id, t) {
		q.s.observe(ctx, t.d, t.v, t.wait)
	}
}

// apply stores turn t of message m (id), and reports whether it was a
// delivery (or a parking) to tell the Observer of.
func (q *Memory) apply(m *memMsg, id int64, t turn) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	released := m.released
	m.released = false
	switch {
	case t.stopping: // due again, not counted; no signal: the workers are stopping
		m.state, m.attempts = memPending, m.attempts-1
		q.ready = append(q.ready, id)
		return false
	case t.putOff: // not counted
		m.attempts--
		q.laterLocked(m, id, t.wait)
		return false
	}
	m.rec = t.rec
	switch {
	case t.d.Reason != "":
		m.state, m.parkedAt = memParked, q.s.now()
	case t.v == delivered:
		m.state = memDelivered
	case released:
		m.state = memPending
		q.pushLocked(id)
	default:
		q.laterLocked(m, id, t.wait)
	}
	for _, held := range t.release {
		h := q.msgs[held]
		switch {
		case h == nil:
		case h.state == memRunning: // the turn that held it has not ended yet
			h.released = true
		case h.state == memPending && h.timer != nil && h.timer.Stop():
			h.timer = nil
			q.pushLocked(held)
		}
	}
	return true
}

// laterLocked makes message m (id) due again after wait.
func (q *Memory) laterLocked(m *memMsg, id int64, wait time.Duration) {
	m.state = memPending
	m.timer = time.AfterFunc(wait, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		m.timer = nil
		q.pushLocked(id)
	})
}

// Parked returns up to limit parked messages whose ID is over after,
// oldest first.
func (q *Memory) Parked(_ context.Context, after int64, limit int) ([]ParkedMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []ParkedMessage
	for id, m := range q.msgs {
		if id > after && m.state == memParked {
			out = append(out, q.parkedLocked(id, m))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out[:min(len(out), max(limit, 1))], nil
}

// Redrive makes the parked message id due again with its key and a new
// retry window, or returns [ErrNotParked] or [ErrPastRetention], as
// [Outbox.Redrive] does.
func (q *Memory) Redrive(_ context.Context, id int64) error {
	return q.redrive(id, false)
}

// RedrivePastRetention is [Memory.Redrive] without the key retention's
// check, as [Outbox.RedrivePastRetention].
func (q *Memory) RedrivePastRetention(_ context.Context, id int64) error {
	return q.redrive(id, true)
}

func (q *Memory) redrive(id int64, force bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.msgs[id]
	if m == nil || m.state != memParked {
		return fmt.Errorf("%w: %d", ErrNotParked, id)
	}
	rec, err := q.s.redriven(id, m.rec, m.attempts, force)
	if err != nil {
		return fmt.Errorf("%w: %d", err, id)
	}
	m.state, m.rec = memPending, rec
	q.pushLocked(id)
	return nil
}

// Pending returns how many messages are neither delivered nor parked
// ([Stats.Pending]).
func (q *Memory) Pending() int {
	st, _ := q.Stats(context.Background()) // fails only on a done context
	return st.Pending
}
