package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/server"
)

// leaseLog counts what the nodes' Leased attempts of POST /v1/charges
// met, from the middleware's hooks and the handler's steps: takeovers,
// the recovery points they took over from, refused stale completions and
// released attempts. It is safe for concurrent use (the nodes share it).
type leaseLog struct {
	mu        sync.Mutex
	takeovers int            // attempts > 1
	stale     int            // completions refused: another attempt owned the key
	released  map[int]int    // attempts that ended the lease, by status
	recovered map[string]int // taken-over attempts, by the recovery point they found
}

func newLeaseLog() *leaseLog {
	return &leaseLog{released: map[int]int{}, recovered: map[string]int{}}
}

// hooks observe the Leased attempts.
func (l *leaseLog) hooks() server.Hooks {
	leased := func(count func(server.Event)) func(context.Context, server.Event) {
		return func(_ context.Context, e server.Event) {
			if e.Mode == server.Leased {
				l.mu.Lock()
				defer l.mu.Unlock()
				count(e)
			}
		}
	}
	return server.Hooks{
		Claimed: leased(func(e server.Event) {
			if e.Attempt > 1 {
				l.takeovers++
			}
		}),
		Released:        leased(func(e server.Event) { l.released[e.Status]++ }),
		StaleCompletion: leased(func(server.Event) { l.stale++ }),
	}
}

// onStep is api.Config.OnStep: it counts each taken-over attempt once, by
// the recovery point it found, at its first step (api.StepGatewayCalled,
// or api.StepRecorded for an attempt that found "recorded" and skipped
// the gateway).
func (l *leaseLog) onStep(ctx context.Context, step string) {
	lease, ok := server.LeaseFrom(ctx)
	if !ok {
		return
	}
	rec, ok := lease.Recovery()
	first := step == api.StepGatewayCalled || (step == api.StepRecorded && rec.Point == api.StepRecorded)
	if !ok || !first {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recovered[rec.Point]++
}

// recoveredAt returns how many taken-over attempts found the recovery
// point.
func (l *leaseLog) recoveredAt(point string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recovered[point]
}

// String renders the counts in one line.
func (l *leaseLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var points, statuses []string
	for p, n := range l.recovered {
		points = append(points, fmt.Sprintf("%q %d", p, n))
	}
	for s, n := range l.released {
		statuses = append(statuses, fmt.Sprintf("%d: %d", s, n))
	}
	slices.Sort(points)
	slices.Sort(statuses)
	return fmt.Sprintf("%d takeovers (from recovery points: %s), %d stale completions refused, released by status: %s",
		l.takeovers, strings.Join(points, ", "), l.stale, strings.Join(statuses, ", "))
}
