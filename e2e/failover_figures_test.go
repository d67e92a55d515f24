//go:build unix

package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/testserver"
)

// undesignedFailure reports whether an operation ended in a definite
// failure that its design did not call for: any failure of a payment from
// a funded account, or a failure with another status than the 402 or 400
// designed (a call that the client's breaker or budget ended before
// anything was sent is one).
func undesignedFailure(op operation, v verdict) bool {
	return v.kind == testserver.OutcomeFailed && v.status != op.want
}

// failedOutlasting counts the operations of a load that did not end as
// designed (an undesigned definite failure, or an unknown outcome: a call
// that gave up, or returned a 5xx, without knowing whether the payment was
// made) although the deadline of their call (deadlineOf the operation
// after its start) ended after outageEnd: a client that waits for a
// recovering host within the caller's deadline, as a plain retrying client
// would, completes every one of them.
func failedOutlasting(ops []operation, load []timed, deadlineOf func(operation) time.Duration, outageEnd time.Time) int {
	var n int
	for i, tv := range load {
		undesigned := undesignedFailure(ops[i], tv.verdict) || tv.kind == testserver.OutcomeUnknown
		if undesigned && tv.start.Add(deadlineOf(ops[i])).After(outageEnd) {
			n++
		}
	}
	return n
}

// failureWindow returns when, relative to since, the first and the last
// operation of a load ended otherwise than designed (failed or unknown),
// how many did, and how many of those had a deadline of their own (an
// impatient caller's); first and last are 0 when none did.
func failureWindow(ops []operation, load []timed, since time.Time) (first, last time.Duration, n, impatient int) {
	for i, tv := range load {
		if tv.kind != testserver.OutcomeUnknown && !undesignedFailure(ops[i], tv.verdict) {
			continue
		}
		at := tv.end.Sub(since)
		if n == 0 || at < first {
			first = at
		}
		last = max(last, at)
		n++
		if ops[i].deadline > 0 {
			impatient++
		}
	}
	return first, last, n, impatient
}

// longest returns the longest time an operation of a load took.
func longest(load []timed) time.Duration {
	var d time.Duration
	for _, tv := range load {
		d = max(d, tv.end.Sub(tv.start))
	}
	return d
}

// failed counts the load's undesigned failures.
func (r *failoverRun) failed() int {
	var n int
	for i, tv := range r.load {
		if undesignedFailure(r.ops[i], tv.verdict) {
			n++
		}
	}
	return n
}

// failedOutlastingOutage counts the load's operations that failed or
// ended unknown although their deadline outlasted the outage (the kill to the API serving again) and
// the Retry-After that the API sent throughout it (apiRetryAfter): a
// client that honours it learns that the API serves again up to that long
// after it does, so a call whose deadline comes sooner cannot be expected
// to complete (an impatient caller that meets the last 503).
func (r *failoverRun) failedOutlastingOutage() int {
	return failedOutlasting(r.ops, r.load, r.payer.deadlineOf, r.faults.serving.Add(apiRetryAfter))
}

// apiRetryAfter is the Retry-After of the payments API's 503
// store-unavailable (examples/payments/api).
const apiRetryAfter = time.Second

// replayedResends counts the resent operations that had taken effect
// (their resend was answered with the stored response).
func (r *failoverRun) replayedResends() int {
	var n int
	for _, i := range r.resent {
		if r.final[i].replayed {
			n++
		}
	}
	return n
}

// logFigures logs the run's figures on one line, for BENCHMARKS.md.
func (r *failoverRun) logFigures(t *testing.T) {
	t.Helper()
	mode := r.rig.name
	at := r.faults
	first, last, off, impatient := failureWindow(r.ops, r.load, at.killed)
	breaker, budget, other := r.failureReasons()
	t.Logf("failover (%s): %d payments, one every %v, %d workers; outage kill->serving %.2fs, promotion->serving %.2fs (promoted %.2fs after the kill); "+
		"ok %d, failed %d (breaker open %d, budget spent %d, other %d), unknown %d resent with their key (%d had taken effect and replayed, %d ran then); "+
		"lost ok %d, doubles %d; the clients saw failures: %d payments ended otherwise than designed (failed or unknown; %d of them impatient callers'), "+
		"from %+.2fs to %+.2fs after the kill, %d of them although their deadline outlasted the outage and its Retry-After; longest payment %.2fs; %d retried",
		mode, len(r.ops), failoverPace, failoverWorkers, at.serving.Sub(at.killed).Seconds(), at.serving.Sub(at.promotion).Seconds(),
		at.promoted.Sub(at.killed).Seconds(), countKind(r.load, testserver.OutcomeOK), r.failed(), breaker, budget, other,
		len(r.resent), r.replayedResends(), len(r.resent)-r.replayedResends(), r.report.LostOKs, r.report.DoubleEffects,
		off, impatient, first.Seconds(), last.Seconds(), r.failedOutlastingOutage(), longest(r.load).Seconds(), r.retried)
}

// failureReasons counts the load's undesigned failures by reason: the
// client's breaker open, its retry budget spent, anything else.
func (r *failoverRun) failureReasons() (breaker, budget, other int) {
	for i, tv := range r.load {
		switch {
		case !undesignedFailure(r.ops[i], tv.verdict):
		case errors.Is(tv.err, idem.ErrCircuitOpen):
			breaker++
		case errors.Is(tv.err, idem.ErrBudgetExhausted):
			budget++
		default:
			other++
		}
	}
	return breaker, budget, other
}

// countKind counts the load's verdicts of a kind.
func countKind(load []timed, kind testserver.OutcomeKind) int {
	var n int
	for _, tv := range load {
		if tv.kind == kind {
			n++
		}
	}
	return n
}

func TestFailedOutlastingAndFailureWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ops := []operation{{key: "a", want: 201}, {key: "b", want: 201, deadline: time.Second}, {key: "c", want: 402}, {key: "d", want: 402}, {key: "e", want: 201}}
	load := []timed{
		{verdict: verdict{kind: testserver.OutcomeFailed}, start: t0, end: at(time.Second)},                      // its deadline outlasts the outage
		{verdict: verdict{kind: testserver.OutcomeFailed}, start: t0, end: at(time.Second / 2)},                  // its own deadline ended first
		{verdict: verdict{kind: testserver.OutcomeFailed, status: 402}, start: t0, end: at(time.Second / 5)},     // designed
		{verdict: verdict{kind: testserver.OutcomeFailed, status: 503}, start: t0, end: at(3 * time.Second / 2)}, // undesigned
		{verdict: verdict{kind: testserver.OutcomeUnknown}, start: t0, end: at(3 * time.Second)},                 // unknown: not completed either
	}
	p := &payer{deadline: 10 * time.Second}
	if n := failedOutlasting(ops, load, p.deadlineOf, at(2*time.Second)); n != 3 {
		t.Errorf("failedOutlasting = %d, want 3 (a, d and e)", n)
	}
	// An unknown whose own deadline ended before the outage did is not
	// counted, as a failure's is not.
	short := []operation{{key: "f", want: 201, deadline: time.Second}}
	if n := failedOutlasting(short, []timed{{verdict: verdict{kind: testserver.OutcomeUnknown}, start: t0, end: at(time.Second)}}, p.deadlineOf, at(2*time.Second)); n != 0 {
		t.Errorf("failedOutlasting = %d, want 0 (f's deadline came first)", n)
	}
	if first, last, n, impatient := failureWindow(ops, load, t0); first != time.Second/2 || last != 3*time.Second || n != 4 || impatient != 1 {
		t.Errorf("failureWindow = %v, %v, %d, %d impatient; want 500ms, 3s, 4, 1 impatient (b)", first, last, n, impatient)
	}
	if d := longest(load); d != 3*time.Second {
		t.Errorf("longest = %v, want 3s", d)
	}
}
