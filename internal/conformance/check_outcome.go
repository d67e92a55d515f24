package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/idemkit/idem/internal/wire"
)

// outcomeHeaders are the headers of idem's outcome contract
// (docs/CONTRACT.md §4, "Where the operation stands"), in report order.
var outcomeHeaders = []string{wire.HeaderOperationState, wire.HeaderOperationRef, wire.HeaderSafeNewKey, wire.HeaderKeyExpires}

// checkOutcome: an API that tells where an operation stands (idem's own
// extension of the key contract) tells it right on every keyed answer: a
// state, a reference that stays the same for the key (on a replay, on
// the refusal of another body, on a concurrent duplicate's 409; the
// refusal of a malformed key says none, safe), a
// safe-new-key flag that is true only with state none, and a key expiry
// in the future. An API whose first answer carries none of the headers
// gets Info, "not offered": no other API owes them.
func checkOutcome(ctx context.Context, r *runner) Result {
	key, body := r.newKey(), r.intent()
	x1, res := r.first(ctx, key, body)
	if res != nil {
		return *res
	}
	if offered(x1) == nil {
		return Result{Verdict: Info, Detail: "not offered: the first answer carries none of " + strings.Join(outcomeHeaders, ", ") +
			" (idem's extension of the key contract, docs/CONTRACT.md §4)"}
	}
	a := &outcomeAudit{r: r, key: key, ref: x1.header.Get(wire.HeaderOperationRef)}
	a.answer(x1, "the first answer", wire.StateCompleted)
	x2 := r.send(ctx, call{note: "the same request again, same key", key: key, body: body})
	a.answer(x2, "the replay", wire.StateCompleted)
	x3 := r.send(ctx, call{note: "the same key with another body", key: key, body: r.intent()})
	if x3.refused() {
		a.answer(x3, "the refusal of another body", "")
	}
	x4 := r.send(ctx, call{note: "a key with a non-ASCII character", key: nonASCIIKey(r.newKey()), body: r.intent()})
	if x4.refused() {
		a.answer(x4, "the refusal of a malformed key", wire.StateNone)
	}
	waits := a.storm(ctx)
	if len(a.problems) > 0 {
		return failed(r.evidenceOf(a.shown...), "%s", strings.Join(a.problems, "; "))
	}
	return a.verdict(x1, x2, waits)
}

// offered returns the outcome headers x carries, nil when none.
func offered(x exchange) []string {
	var out []string
	for _, name := range outcomeHeaders {
		if x.header.Get(name) != "" {
			out = append(out, name)
		}
	}
	return out
}

// outcomeAudit collects what the answers of the outcome check get wrong.
type outcomeAudit struct {
	r        *runner
	key      string // the key of the first answer
	ref      string // the first answer's reference, "" when it has none
	problems []string
	shown    []exchange
}

// fail records a problem that x shows.
func (a *outcomeAudit) fail(x exchange, format string, args ...any) {
	a.problems = append(a.problems, fmt.Sprintf(format, args...))
	if !slices.ContainsFunc(a.shown, func(y exchange) bool { return y.call.note == x.call.note && y.call.key == x.call.key }) {
		a.shown = append(a.shown, x)
	}
}

// storm sends Concurrency requests of a new operation at once and checks
// the answers: the duplicates told to wait (409) must say in-flight, not
// safe, with the reference of the operation's other answers. It returns
// how many were told to wait.
func (a *outcomeAudit) storm(ctx context.Context) int {
	xs := a.r.storm(ctx, a.r.newKey(), a.r.intent())
	waits, ref := 0, ""
	for _, x := range xs {
		switch {
		case x.ok2xx():
			a.answer(x, "a concurrent request's 2xx", wire.StateCompleted)
		case x.err == nil && x.status == 409:
			waits++
			a.answer(x, "a concurrent duplicate's 409", wire.StateInFlight)
		default:
			continue
		}
		got := x.header.Get(wire.HeaderOperationRef)
		if ref == "" {
			ref = got
		} else if got != "" && got != ref {
			a.fail(x, "the answers of one key sent at once carry two references (%s and %s): a reference must name the operation", ref, got)
		}
	}
	return waits
}

// verdict is the Result of answers that showed no problem: Pass when
// the API offers the whole contract, else Info naming what it offers.
func (a *outcomeAudit) verdict(x1, x2 exchange, waits int) Result {
	var have, lack []string
	for _, name := range outcomeHeaders {
		if x1.header.Get(name) != "" || x2.header.Get(name) != "" {
			have = append(have, name)
		} else {
			lack = append(lack, name)
		}
	}
	detail := "the first answer, the replay and the refusals tell the state consistently: " + strings.Join(have, ", ")
	if waits == 0 {
		detail += "; no concurrent duplicate was told to wait (409), so that answer was not seen"
	} else {
		detail += fmt.Sprintf("; %d concurrent duplicates' 409 said in-flight, not safe, same reference", waits)
	}
	if len(lack) > 0 {
		return Result{Verdict: Info, Detail: detail + "; not offered: " + strings.Join(lack, ", ")}
	}
	return passed("", "%s", detail)
}
