package trace

import (
	"sync"
	"sync/atomic"
)

// Fault is a fault seeded into a store's code, for a test to show that the
// trace check catches it.
type Fault string

// The seeded faults.
const (
	// CompleteIgnoresToken: PostgresStore's completion, and mysqlidem's
	// Leased one, drop the token from the WHERE clause (idem.pml's
	// M_COMPLETE_NO_TOKEN).
	CompleteIgnoresToken Fault = "complete-ignores-token"
	// TakeoverTrustsRead: PostgresStore's takeover drops the token it read
	// and the lease's end from its WHERE clause (M_TAKEOVER_TRUSTS_READ).
	TakeoverTrustsRead Fault = "takeover-trusts-read"
	// CompleteNotReplicated: idemredis acknowledges a completion without
	// waiting for its replicas (WAIT), whatever Config.Replicas says.
	CompleteNotReplicated Fault = "complete-not-replicated"
	// OutboxRedrivePastRetention: the outbox's Redrive skips its
	// ErrPastRetention check and forgets the first delivery, as
	// RedrivePastRetention does (outbox.pml's M_REDRIVE_PAST_RETENTION).
	OutboxRedrivePastRetention Fault = "outbox-redrive-past-retention"
	// OutboxIgnoresRetention: the outbox parks at MaxAttempts and MaxAge
	// only (M_RETRY_PAST_RETENTION).
	OutboxIgnoresRetention Fault = "outbox-ignores-retention"
	// OutboxRedriveNewKey: a re-driven message is delivered under a new
	// key (M_REDRIVE_NEW_KEY).
	OutboxRedriveNewKey Fault = "outbox-redrive-new-key"
)

var (
	seededN  atomic.Int32
	seededMu sync.Mutex
	seeded   = map[Fault]int{}
)

// Seed seeds f into the stores of the process until tb ends. Tests that
// seed a fault must not run in parallel with tests that expect a correct
// store.
func Seed(tb TB, f Fault) {
	tb.Helper()
	seededMu.Lock()
	seeded[f]++
	seededMu.Unlock()
	seededN.Add(1)
	tb.Cleanup(func() {
		seededMu.Lock()
		seeded[f]--
		seededMu.Unlock()
		seededN.Add(-1)
	})
}

// Seeded reports whether f is seeded; a store consults it where f weakens
// a statement.
func Seeded(f Fault) bool {
	if seededN.Load() == 0 {
		return false
	}
	seededMu.Lock()
	defer seededMu.Unlock()
	return seeded[f] > 0
}
