package conformance

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/idemkit/idem/testserver"
)

// maxFaultEvidence bounds the violations a failed faults check shows.
const maxFaultEvidence = 5

// checkFaults drives Operations operations, one after the other, through
// a fault proxy with the idem client, and reads the counter after each:
// the growth is that operation's effects. testserver.Check then compares
// effects with outcomes: every operation must take effect at most once,
// every ok must have its effect, no definite failure may have one.
func checkFaults(ctx context.Context, r *runner) Result {
	if r.cfg.Effects.CountURL == "" {
		return notApplicable("needs -count-url: an effect whose response was lost shows in no response, only in a count")
	}
	g, err := r.newFaultRig()
	if err != nil {
		return failed(nil, "could not start the fault proxy: %v", err)
	}
	defer g.close()
	if g.last, err = r.count(ctx); err != nil {
		return failed(nil, "could not read the count: %v", err)
	}
	for n := 1; n <= r.cfg.Operations; n++ {
		if res := g.operation(ctx, n); res != nil {
			return *res
		}
	}
	return g.conclude(testserver.Check(&g.ledger, &g.history))
}

// operation makes operation n under a fresh key, records its outcome in
// the history and its effects (the counter's growth since the last read)
// in the ledger. res is a failed Result when the operation could not be
// judged.
func (g *faultRig) operation(ctx context.Context, n int) (res *Result) {
	r := g.r
	key := r.newKey()
	g.ops[key] = n
	if ctx.Err() != nil {
		f := failed(nil, "the run's time was up (-timeout) after %d of %d operations", n-1, r.cfg.Operations)
		return &f
	}
	rule := testserver.Rule{Name: "idemcheck", Match: testserver.Match{Key: key}, Script: g.script(n)}
	if err := g.srv.SetRules([]testserver.Rule{rule}); err != nil {
		f := failed(nil, "fault rule: %v", err)
		return &f
	}
	v := g.do(ctx, key, r.intent())
	switch v.kind {
	case testserver.OutcomeOK:
		g.history.OK(key, v.id)
	case testserver.OutcomeFailed:
		g.history.Failed(key, v.err)
	default:
		g.history.Unknown(key, v.err)
	}
	now, err := r.count(ctx)
	if err != nil {
		f := failed(nil, "could not read the count after operation %d: %v", n, err)
		return &f
	}
	if now < g.last {
		f := failed(nil, "the count went down, from %d to %d, during operation %d: something else changes it", g.last, now, n)
		return &f
	}
	for i := int64(0); i < now-g.last; i++ {
		g.ledger.Record(key, g.result(ctx, v, i))
	}
	g.last = now
	return nil
}

// result is the ledger's result for the i-th effect of an operation: the
// id the client was told of, for the first effect of an ok (replaced by a
// note when VerifyURL cannot find it), else none.
func (g *faultRig) result(ctx context.Context, v verdict, i int64) string {
	if i > 0 || v.kind != testserver.OutcomeOK || v.id == "" {
		return ""
	}
	if err := g.r.verify(ctx, v.id); err != nil {
		return "(the id is not found: " + err.Error() + ")"
	}
	return v.id
}

// conclude turns the checker's report into the check's Result.
func (g *faultRig) conclude(rep testserver.Report) Result {
	events := g.srv.Events()
	faults, kinds := 0, map[testserver.FaultKind]int{}
	for _, e := range events {
		if e.Fault.Kind != testserver.FaultNone {
			faults++
			kinds[e.Fault.Kind]++
		}
	}
	summary := fmt.Sprintf("%d operations, %d attempts, %d faults (%s; seed %d): %d ok, %d failed, %d unknown; %d effects",
		rep.Operations, len(events), faults, kindList(kinds), g.r.cfg.Seed, rep.OK, rep.Failed, rep.Unknown, rep.Effects)
	if rep.Unknown > 0 {
		summary += fmt.Sprintf(" (unknown outcomes: %d took effect, %d did not)", rep.UnknownApplied, rep.UnknownNotApplied)
	}
	slow := g.slowness(kinds[testserver.FaultDelayResponse])
	summary += slow
	switch {
	case len(rep.Violations) == 0 && rep.OK == 0 && slow != "":
		return notApplicable("%s; no operation succeeded through the proxy, so nothing was shown", summary)
	case len(rep.Violations) == 0 && rep.OK == 0:
		return failed(nil, "%s; no operation succeeded through the proxy, so nothing was shown", summary)
	}
	if len(rep.Violations) == 0 {
		return passed(basisCount, "%s; no double effect, no lost ok, no failure that took effect", summary)
	}
	var ev []Evidence
	for i, v := range rep.Violations {
		if i == maxFaultEvidence {
			ev = append(ev, Evidence{Note: fmt.Sprintf("... and %d more violations", len(rep.Violations)-i)})
			break
		}
		ev = append(ev, Evidence{Note: fmt.Sprintf("operation %d (key %s): %v; attempts: %s",
			g.ops[v.Op], v.Op, v.Kind, attempts(events, v.Op))})
	}
	return failed(ev, "%s; %d violations: %d double effects (%d extra), %d lost oks, %d wrong results, %d failures that took effect",
		summary, len(rep.Violations), rep.DoubleEffects, rep.ExtraEffects, rep.LostOKs, rep.WrongResults, rep.FailedApplied)
}

// slowness returns, when the client's attempts timed out more often than
// the proxy's injected slow responses explain, a sentence that says so and
// suggests a larger attempt timeout; "" otherwise.
func (g *faultRig) slowness(injected int) string {
	extra := g.timeouts.Load() - int64(injected)
	if extra <= 0 {
		return ""
	}
	return fmt.Sprintf("; %d attempts timed out (-attempt-timeout %s) besides the proxy's slow responses: the server may take longer than that to answer: rerun with a larger -attempt-timeout",
		extra, g.r.cfg.AttemptTimeout)
}

// kindList renders fault counts: "drop-reset 3, reset 2".
func kindList(kinds map[testserver.FaultKind]int) string {
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, string(k))
	}
	sort.Strings(names)
	for i, n := range names {
		names[i] = fmt.Sprintf("%s %d", n, kinds[testserver.FaultKind(n)])
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// attempts renders the proxy's events of one operation: "1 drop-reset
// (handler 201), 2 none (201)".
func attempts(events []testserver.Event, op string) string {
	var mine []testserver.Event
	for _, e := range events {
		if e.Op == op {
			mine = append(mine, e)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Attempt < mine[j].Attempt })
	parts := make([]string, len(mine))
	for i, e := range mine {
		parts[i] = fmt.Sprintf("%d %s (handler %d, sent %d)", e.Attempt, e.Fault.Kind, e.HandlerStatus, e.Status)
		if e.Fault.Kind == testserver.FaultNone {
			parts[i] = fmt.Sprintf("%d no fault (%d)", e.Attempt, e.Status)
		}
	}
	return strings.Join(parts, ", ")
}
