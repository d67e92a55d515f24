package conformance

import (
	"context"
	"fmt"
	"net/http"
)

// checkScope: the same key and body from a second principal is an
// operation of its own: it runs (a second effect), and never gets the
// first principal's stored response.
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
	id1, _ := r.id(x1)
	id2, _ := r.id(x2)
	switch {
	case x2.err != nil:
		return failed(ev, "the second principal got %s", x2.outcome())
	case x2.sameAs(x1) || r.marked(x2) || (id1 != "" && id1 == id2):
		return failed(ev, "the second principal got the first principal's stored response (%d): keys are not scoped by principal, and a response leaked across principals", x2.status)
	case x2.status == http.StatusConflict || x2.status == http.StatusUnprocessableEntity:
		return failed(ev, "the second principal got %d: the API matched its request against the first principal's use of the key, so keys are not scoped by principal", x2.status)
	case !x2.ok2xx():
		return notApplicable("the second principal could not make the request (%s): give -principal2 credentials that may make it, with the same body", x2.outcome())
	}
	if p := r.effectProblem(ctx, t, 2); p != "" {
		return failed(ev, "both principals got their own %d, but %s", x2.status, p)
	}
	detail := fmt.Sprintf("the second principal's request ran as an operation of its own (%d, another response)", x2.status)
	if t.on {
		detail += "; the count grew by 2"
	}
	return passed(r.basis(), "%s", detail)
}
