package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/server"
)

// Harness is what [Run] needs of a store. New is required; every other
// field is optional, and says what nil means.
type Harness struct {
	// New returns a new store that holds no records and whose clock runs
	// clock.Offset() ahead of the store's own (PostgresStore adds it to
	// the database clock). The suite calls it once per test, from tests
	// that run in parallel: the records of each store must be apart from
	// every other's (a schema, a key prefix of its own). t's cleanup may
	// release what the store holds.
	New func(t *testing.T, clock *Clock) server.Store

	// Node returns another node's store over the records of s (a store
	// on a connection pool of its own), with the same clock. Nil: s
	// itself serves as the second node.
	Node func(t *testing.T, s server.Store, clock *Clock) server.Store

	// Waiting blocks until at least n claims on s are waiting now for a
	// running Transactional attempt of their scope (on a lock, a
	// channel), failing t after 30 s. Required when s supports
	// Transactional mode: the suite tests the wait with it.
	Waiting func(t *testing.T, s server.Store, n int)

	// SelfExpiring says that s's records disappear by themselves once
	// their retention has passed (Redis's key expiry), so that Sweep
	// deletes none: the suite then checks only that sweeps keep every
	// record that still answers, not how many they delete.
	SelfExpiring bool

	// Effect, when set, makes a handler's effect named label in the
	// request's database transaction when the request has one (as
	// [server.Tx] gives a PostgresStore's Transactional handler), and
	// reports whether it did; Effects counts the effects of label that
	// committed on s's database. With them the suite checks that a
	// Transactional attempt's effects commit with its record or not at
	// all. Nil: effects are counted in memory, outside any transaction.
	Effect  func(ctx context.Context, label string) (bool, error)
	Effects func(t *testing.T, s server.Store, label string) int

	// EndTx, when set, ends the transaction of the Transactional request
	// that ctx belongs to as a careless handler could (pgx's
	// Exec("commit"), *sql.Tx's Commit), so that the suite checks that the
	// store catches it ([server.ErrTxEnded]). Nil: that test does not run.
	EndTx func(ctx context.Context) error

	// LoseConn, when set, breaks the connection of the request's
	// transaction from another session (pg_terminate_backend), so that the
	// suite checks that a commit on a lost connection answers 503 and
	// leaves nothing. Nil: that test does not run.
	LoseConn func(ctx context.Context) error
}

// Clock is a store's test clock: the store judges time by its own clock
// plus Offset, which the suite moves forward with Advance. It is safe for
// concurrent use.
type Clock struct{ off atomic.Int64 }

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// Offset is how far the clock has been moved.
func (c *Clock) Offset() time.Duration { return time.Duration(c.off.Load()) }

// Now is the local time plus Offset, for a store whose clock is the
// process's own ([server.MemoryStore]'s).
func (c *Clock) Now() time.Time { return time.Now().Add(c.Offset()) }

// mode is a [server.Mode] a test runs in.
type mode struct {
	name string
	mode server.Mode
}

var (
	transactional = mode{"Transactional", server.Transactional}
	leased        = mode{"Leased", server.Leased}
	bothModes     = []mode{transactional, leased}
)

// area is one test of the suite, run in each of its modes that the store
// supports.
type area struct {
	name  string
	modes []mode
	run   func(t *testing.T, e *env, m mode)
}

// Run runs every area of the suite on stores made by h, each test as a
// parallel subtest of t, in each mode the store supports.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("storetest: Harness.New is required")
	}
	probe := h.New(t, &Clock{})
	var supported []mode
	for _, m := range bothModes {
		if err := probe.CheckMode(m.mode); err != nil {
			t.Logf("storetest: the store refuses %s mode, whose areas do not run: %v", m.name, err)
			continue
		}
		supported = append(supported, m)
	}
	if len(supported) == 0 {
		t.Fatal("storetest: the store refuses both modes")
	}
	_, records := probe.(server.RecordStore)
	if !records {
		t.Logf("storetest: the store does not implement server.RecordStore: its operator areas do not run")
	}
	for _, a := range areas(t, h, records) {
		var modes []mode
		for _, m := range a.modes {
			if supports(supported, m) {
				modes = append(modes, m)
			}
		}
		if len(modes) == 0 {
			continue
		}
		t.Run(a.name, func(t *testing.T) {
			for _, m := range modes {
				t.Run(m.name, func(t *testing.T) {
					t.Parallel()
					a.run(t, newEnv(t, h), m)
				})
			}
		})
	}
}

func supports(ms []mode, m mode) bool {
	for _, s := range ms {
		if s == m {
			return true
		}
	}
	return false
}

// areas is the whole suite for h: the Transactional areas (txAreas) only
// when the handler's effects go in the store's transaction (h.Effect), the
// operator areas only for a [server.RecordStore] (records).
func areas(t *testing.T, h Harness, records bool) []area {
	groups := [][]area{replayAreas, responseAreas, leaseAreas, waitAreas, sweepAreas, reconcileAreas, uncertainAreas}
	if h.Effect != nil {
		groups = append(groups, txAreas)
	} else {
		t.Log("storetest: Harness.Effect is nil: the Transactional areas, which need the handler's transaction, do not run")
	}
	var all []area
	for _, group := range groups {
		all = append(all, group...)
	}
	if records {
		all = append(all, operatorAreas...)
	}
	return all
}

// env is one test's store, its clock and the effects its handlers made.
type env struct {
	t     *testing.T
	h     Harness
	store server.Store
	clock *Clock

	mu      sync.Mutex
	effects map[string]int // effects outside a database transaction
}

func newEnv(t *testing.T, h Harness) *env {
	e := &env{t: t, h: h, clock: &Clock{}, effects: map[string]int{}}
	e.store = h.New(t, e.clock)
	return e
}

// effect records one effect of a handler: in the request's transaction
// when the harness makes one there, else in memory.
func (e *env) effect(ctx context.Context, label string) error {
	if e.h.Effect != nil {
		if did, err := e.h.Effect(ctx, label); did || err != nil {
			return err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.effects[label]++
	return nil
}

// count is the number of effects with label that persisted.
func (e *env) count(label string) int {
	e.mu.Lock()
	n := e.effects[label]
	e.mu.Unlock()
	if e.h.Effects != nil {
		n += e.h.Effects(e.t, e.store, label)
	}
	return n
}

// transactionalEffects reports whether the effects of a Transactional
// handler are made in its transaction, so that a rolled-back attempt's
// vanish.
func (e *env) transactionalEffects(m mode) bool {
	return m == transactional && e.h.Effect != nil
}

// node is a second node's store over e's records.
func (e *env) node() server.Store {
	if e.h.Node == nil {
		return e.store
	}
	return e.h.Node(e.t, e.store, e.clock)
}

// waiting blocks until n claims wait for a running Transactional attempt.
func (e *env) waiting(n int) {
	e.t.Helper()
	if e.h.Waiting == nil {
		e.t.Fatal("storetest: the store supports Transactional mode: Harness.Waiting is required")
	}
	e.h.Waiting(e.t, e.store, n)
}
