package e2e

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/testserver"
)

// runLoad makes every payment of ops through p on workers goroutines and
// returns the verdicts, by operation. onDone, when set, is called with the
// number of operations finished so far each time one finishes (from the
// worker's goroutine). It stops early when ctx ends; the operations not
// made then have a zero verdict.
func runLoad(ctx context.Context, p *payer, ops []operation, workers int, onDone func(done int)) []verdict {
	return verdictsOf(runTimedLoad(ctx, p, ops, workers, onDone))
}

// timed is the verdict of one operation and when its client started and
// ended it.
type timed struct {
	verdict
	start, end time.Time
}

// runTimedLoad is runLoad, keeping when each operation started and ended.
func runTimedLoad(ctx context.Context, p *payer, ops []operation, workers int, onDone func(done int)) []timed {
	out, _ := runFed(ctx, p, ops, workers, upTo(len(ops)), onDone)
	return out
}

// runFed makes the payments of ops whose indexes feed yields, in that order
// and at its pace, through p on workers goroutines (feed waits while they
// are all busy), and returns how each went, by operation, and how many
// feed gave before it ended or ctx did; the operations not made have a
// zero verdict. onDone is runLoad's.
func runFed(ctx context.Context, p *payer, ops []operation, workers int, feed iter.Seq[int], onDone func(done int)) (out []timed, fed int) {
	out = make([]timed, len(ops))
	next := make(chan int)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				start := time.Now()
				v := p.pay(ctx, ops[i])
				out[i] = timed{verdict: v, start: start, end: time.Now()}
				if n := int(done.Add(1)); onDone != nil {
					onDone(n)
				}
			}
		})
	}
	for i := range feed {
		select {
		case next <- i:
			fed++
			continue
		case <-ctx.Done():
		}
		break
	}
	close(next)
	wg.Wait()
	return out, fed
}

// upTo yields 0, 1, ..., n-1 as fast as they are taken.
func upTo(n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
}

// verdictsOf returns the verdicts of a timed load.
func verdictsOf(ts []timed) []verdict {
	verdicts := make([]verdict, len(ts))
	for i, t := range ts {
		verdicts[i] = t.verdict
	}
	return verdicts
}

// history records the client's conclusions for testserver.Check.
func history(ops []operation, verdicts []verdict) *testserver.History {
	var h testserver.History
	for i, op := range ops {
		switch v := verdicts[i]; v.kind {
		case testserver.OutcomeOK:
			h.OK(op.key, v.result)
		case testserver.OutcomeFailed:
			h.Failed(op.key, v.err)
		default:
			h.Unknown(op.key, v.err)
		}
	}
	return &h
}

// requireExactlyOnce reads the ground truth from the database and fails
// the test, with the checker's report, the seed and detail, when an
// operation took effect more than once, an ok has no effect (or another
// payment's id), a definite failure took effect, a payment belongs to no
// operation, or the balances do not add up.
func requireExactlyOnce(t *testing.T, db *database, seed uint64, ops []operation, verdicts []verdict, detail string) {
	t.Helper()
	payments := db.payments(t)
	report := testserver.Check(ledger(payments), history(ops, verdicts))
	if err := report.Err(); err != nil {
		t.Fatalf("exactly-once violated (IDEM_SEED=%d):\n%s\n%s\n%v", seed, report, detail, err)
	}
	db.requireConsistent(t, ops, payments)
	t.Logf("checker (IDEM_SEED=%d):\n%s", seed, report)
}

// requireDesigned fails the test when more than maxOff operations ended
// otherwise than designed: ok for a payment from a funded account, a
// definite 402 or 400 for the empty and the missing account. An unknown
// outcome is no violation (the checker says how it ended), but a client
// that left many unknowns would be no use: maxOff bounds them.
func requireDesigned(t *testing.T, ops []operation, verdicts []verdict, maxOff int) {
	t.Helper()
	var off []string
	for i, op := range ops {
		v := verdicts[i]
		designed := v.status == op.want &&
			(v.kind == testserver.OutcomeOK) == (op.want == 201) && v.kind != testserver.OutcomeUnknown
		if !designed {
			off = append(off, fmt.Sprintf("%s (want %d): %s, status %d: %v", op.key, op.want, v.kind, v.status, v.err))
		}
	}
	if len(off) > maxOff {
		t.Fatalf("%d of %d operations ended otherwise than designed, want at most %d:\n%s",
			len(off), len(ops), maxOff, strings.Join(off[:min(len(off), 20)], "\n"))
	}
	if len(off) > 0 {
		t.Logf("%d operations ended otherwise than designed (at most %d allowed):\n%s", len(off), maxOff, strings.Join(off[:min(len(off), 20)], "\n"))
	}
}
