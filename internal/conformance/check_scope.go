package conformance

import (
	"context"
	"net/http"
)

// checkScope: the same key and body from a second principal is an
// operation of its own: it runs (a second effect), and never gets the
// first principal's stored response. With a count, the count (+2) and the
// replay mark decide; without one, the ids, or the bodies, where identical
// bytes cannot tell a leak from a second operation.
func checkScope(ctx context.Context, r *runner) Result {
	if r.cfg.Principal2 == nil {
		return notApplicable("give -principal2 the headers of a second principal (another user of the same tenant) that may make the same request")
	}
	t, err := r.startTally(ctx)
	if err != nil {
		return failed(nil, "could not read the count: %v", err)
	}
	key, body := r.newKey(), r.intent()
	x1, res := r.first(ctx, key, body)
	if res != nil {
		return *res
	}
	x2 := r.send(ctx, call{note: "the same key and body from the second principal", key: key, body: body, second: true})
	ev := r.evidenceOf(x1, x2)
	id1, ok1 := r.id(x1)
	id2, ok2 := r.id(x2)
	switch {
	case x2.err != nil:
		return failed(ev, "the second principal got %s", x2.outcome())
	case r.marked(x2):
		return failed(ev, "the second principal got the first principal's stored response, marked as a replay (%d, %s: %s): keys are not scoped by principal, and a response leaked across principals",
			x2.status, r.cfg.ReplayedHeader, x2.replayed)
	case ok1 && ok2 && id1 == id2:
		return failed(ev, "the second principal got the first principal's stored response, naming its resource %s (%d): keys are not scoped by principal, and a response leaked across principals", id1, x2.status)
	case x2.status == http.StatusConflict || x2.status == http.StatusUnprocessableEntity:
		return failed(ev, "the second principal got %d: the API matched its request against the first principal's use of the key, so keys are not scoped by principal", x2.status)
	case !x2.ok2xx():
		return notApplicable("the second principal could not make the request (%s): give -principal2 credentials that may make it, with the same body", x2.outcome())
	case t.on:
		return r.scopeByCount(ctx, t, x1, x2, ev)
	case x2.sameAs(x1):
		return notApplicable("cannot tell: the second principal got the same %d and bytes as the first, which a replay of the first principal's response and an operation of its own with the same response both give: give -count-url (or -id-field, when the response names the resource) to decide", x2.status)
	}
	return passed(r.basis(), "the second principal's request ran as an operation of its own (%d, another response)", x2.status)
}

// scopeByCount judges the scope check by the count: two operations ran
// when it grew by 2.
func (r *runner) scopeByCount(ctx context.Context, t tally, x1, x2 exchange, ev []Evidence) Result {
	got, err := r.effects(ctx, t)
	switch {
	case err != nil:
		return failed(ev, "could not read the count: %v", err)
	case got == 2 && x2.sameAs(x1):
		return passed(basisCount, "the second principal's request ran as an operation of its own (%d, the same bytes as the first's response); the count grew by 2", x2.status)
	case got == 2:
		return passed(basisCount, "the second principal's request ran as an operation of its own (%d, another response); the count grew by 2", x2.status)
	case got == 1 && x2.sameAs(x1):
		return failed(ev, "the second principal got the first principal's stored response (%d), and the count grew by 1: keys are not scoped by principal, and a response leaked across principals", x2.status)
	}
	return failed(ev, "both principals got a %d, but the count grew by %d, want 2", x2.status, got)
}
