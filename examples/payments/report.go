package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/testserver"
)

// printReport prints the two columns side by side, then what the checker
// found in each.
func printReport(w io.Writer, r result) {
	a, b := r.idem, r.naive
	row := func(label, x, y string) { fmt.Fprintf(w, "%-40s %14s %14s\n", label, x, y) }
	num := func(label string, f func(c column) int) { row(label, strconv.Itoa(f(a)), strconv.Itoa(f(b))) }

	row("", a.name, b.name)
	num("payments (logical operations)", func(c column) int { return c.report.Operations })
	num("  ok: 201 with a payment id", func(c column) int { return c.report.OK })
	num("  failed for sure: 402, 4xx, not sent", func(c column) int { return c.report.Failed })
	num("  unknown outcome", func(c column) int { return c.report.Unknown })
	num("    of which were paid", func(c column) int { return c.report.UnknownApplied })
	num("attempts on the wire (event log)", func(c column) int { return c.summary.Requests })
	num("faults injected", func(c column) int { return c.summary.Requests - c.summary.Faults[testserver.FaultNone] })
	for _, k := range testserver.Kinds() {
		if a.summary.Faults[k]+b.summary.Faults[k] == 0 {
			continue
		}
		num("  "+faultLabel(k), func(c column) int { return c.summary.Faults[k] })
	}
	num("payments made (rows in the database)", func(c column) int { return c.report.Effects })
	num("DOUBLE PAYMENTS (operations paid 2+ times)", func(c column) int { return c.report.DoubleEffects })
	num("  extra payments", func(c column) int { return c.report.ExtraEffects })
	num("lost ok (told ok, never paid)", func(c column) int { return c.report.LostOKs })
	num("other violations", func(c column) int {
		return c.report.WrongResults + c.report.FailedApplied + c.report.OrphanEffects
	})
	if a.notes.off {
		row("notifications (no outbox on MySQL)", "-", "-")
	} else {
		num("notifications enqueued (one per payment)", func(c column) int { return c.notes.enqueued })
		num("  delivered (outbox)", func(c column) int { return c.notes.delivered })
		num("  DELIVERED TWICE", func(c column) int { return c.notes.twice })
		num("  lost (never delivered, not parked)", func(c column) int { return c.notes.lost })
		num("  parked (given up, kept for an operator)", func(c column) int { return c.notes.parked })
		num("  delivery attempts (event log)", func(c column) int { return c.notes.attempts })
	}
	row("retry budget denials", optional(a.budgetDenied), optional(b.budgetDenied))
	row("circuit breaker trips", optional(a.breakerTrips), optional(b.breakerTrips))
	row("  open or probing, in all", optionalDuration(a), optionalDuration(b))
	for _, g := range gaveUpRows {
		row(g.label, gaveUp(a, g.reason), gaveUp(b, g.reason))
	}
	row("waits before retries, all payments", round(a.waitedRetryAfter+a.waitedOwn), round(b.waitedRetryAfter+b.waitedOwn))
	row("  honouring the server's Retry-After", round(a.waitedRetryAfter), round(b.waitedRetryAfter))
	row("latency p50", round(a.p50), round(b.p50))
	row("latency p99", round(a.p99), round(b.p99))
	row("time", round(a.elapsed), round(b.elapsed))
	fmt.Fprintln(w)
	printVerdict(w, a)
	printVerdict(w, b)
	printNotesVerdict(w, a, b)
	printWhyFewer(w, a, b)
	printWhySlower(w, a, b)
}

// gaveUpRows are the table's rows of the idem client's payments given up,
// by reason.
var gaveUpRows = []struct{ label, reason string }{
	{"payments given up: breaker open", gaveUpBreaker},
	{"payments given up: retry budget empty", gaveUpBudget},
	{"payments given up: deadline", gaveUpDeadline},
	{"payments given up: attempts ran out", gaveUpAttempts},
	{"payments given up: other", gaveUpOther},
}

// printWhyFewer says why, when the idem client made fewer payments than the
// naive one: its breaker, its budget, its deadlines, its attempts.
func printWhyFewer(w io.Writer, idemc, naive column) {
	if idemc.report.OK >= naive.report.OK {
		return
	}
	fmt.Fprintf(w, "Why the idem client completed fewer payments (%d against %d):", idemc.report.OK, naive.report.OK)
	if idemc.breakerTrips > 0 {
		fmt.Fprintf(w, " its breaker opened %d times and was open or probing for %s in all, the host failing the attempts that opened it;",
			idemc.breakerTrips, round(idemc.breakerNotClosed))
	}
	var parts []string
	for _, g := range gaveUpRows {
		if n := idemc.gaveUp[g.reason]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, gaveUpWhy[g.reason]))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "none gave up: the difference is in answers that are not a payment (see the rows above)")
	}
	fmt.Fprintf(w, " of its payments, %s.\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "  None of them was paid twice; the naive client's extra payments cost %d double payments.\n", naive.report.DoubleEffects)
}

// gaveUpWhy says what each reason means, for printWhyFewer.
var gaveUpWhy = map[string]string{
	gaveUpBreaker:  "waited for the breaker and ran out of deadline",
	gaveUpBudget:   "waited for a retry token and ran out of deadline",
	gaveUpDeadline: fmt.Sprintf("reached their %s deadline", paymentDeadline),
	gaveUpAttempts: "ran out of attempts",
	gaveUpOther:    "ended with another error",
}

// gaveUp renders a column's count of payments given up for reason, "-"
// for a client that does not say.
func gaveUp(c column, reason string) string {
	if c.gaveUp == nil {
		return "-"
	}
	return strconv.Itoa(c.gaveUp[reason])
}

// optionalDuration renders how long a column's breaker was not closed,
// "-" for a client without one.
func optionalDuration(c column) string {
	if c.breakerTrips < 0 {
		return "-"
	}
	return round(c.breakerNotClosed)
}

// printWhySlower says where the idem client's time goes when it is the
// slower one: the waits it makes on purpose.
func printWhySlower(w io.Writer, idemc, naive column) {
	if idemc.elapsed <= naive.elapsed {
		return
	}
	fmt.Fprintf(w, "Why the idem client took longer (%s against %s): it waits on purpose.\n"+
		"  Over all payments it waited %s before its retries: %s honouring the server's Retry-After\n"+
		"  (the 503 bursts ask for whole seconds) and %s backing off with jitter, so that retries do not\n"+
		"  pile onto a struggling server; the naive client ignored Retry-After and waited %s in fixed pauses.\n",
		round(idemc.elapsed), round(naive.elapsed), round(idemc.waitedRetryAfter+idemc.waitedOwn),
		round(idemc.waitedRetryAfter), round(idemc.waitedOwn), round(naive.waitedRetryAfter+naive.waitedOwn))
	if idemc.budgetDenied > 0 {
		fmt.Fprintf(w, "  Its retry budget also refused %d retries, attempts it saved the server.\n", idemc.budgetDenied)
	}
	fmt.Fprintf(w, "  Its waits show in its latency; the naive client's speed is paid in %d double payments.\n",
		naive.report.DoubleEffects)
}

// printNotesVerdict says whether the outbox kept its promise in both
// columns: every payment notified exactly once (or parked).
func printNotesVerdict(w io.Writer, cs ...column) {
	if cs[0].notes.off {
		fmt.Fprintln(w, "outbox: not run (package outbox keeps its messages in Postgres, with River): no notifications checked.")
		return
	}
	for _, c := range cs {
		if c.notes.violated() {
			fmt.Fprintf(w, "outbox (%s): VIOLATION: %d notifications delivered twice, %d lost.\n", c.name, c.notes.twice, c.notes.lost)
			return
		}
	}
	fmt.Fprintln(w, "outbox: every payment's notification recorded exactly once by the receiver (testserver.Check), through the same faults.")
}

// printVerdict says what the checker found in a column, with examples.
func printVerdict(w io.Writer, c column) {
	if len(c.report.Violations) == 0 {
		fmt.Fprintf(w, "%s: no violation (testserver.Check): no payment made twice, every ok has its payment.\n", c.name)
		if c.report.Unknown > 0 {
			fmt.Fprintf(w, "  %d unknown outcomes: the client gave up (deadline, budget, breaker) and says so; resending them with the same key is safe.\n", c.report.Unknown)
		}
		return
	}
	fmt.Fprintf(w, "%s: %d violations (testserver.Check), for example:\n", c.name, len(c.report.Violations))
	for _, v := range c.report.Violations[:min(5, len(c.report.Violations))] {
		fmt.Fprintf(w, "  %v\n", v)
	}
}

// faultLabels describe the faults of the demo's mix.
var faultLabels = map[testserver.FaultKind]string{
	testserver.FaultStatus:        "503 + Retry-After, before",
	testserver.FaultReset:         "reset before the request was read",
	testserver.FaultDropReset:     "paid, response dropped (RST)",
	testserver.FaultDropClose:     "paid, response dropped (FIN)",
	testserver.FaultStatusAfter:   "paid, 502 instead of the 201",
	testserver.FaultPartialBody:   "paid, body cut short",
	testserver.FaultDelayResponse: "paid, response past the timeout",
}

// faultLabel describes a fault kind, by its name for kinds outside the
// demo's mix.
func faultLabel(k testserver.FaultKind) string {
	if label, ok := faultLabels[k]; ok {
		return label
	}
	return string(k)
}

// optional renders a count that is -1 for a client without the feature.
func optional(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// round renders a duration to a readable precision.
func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
