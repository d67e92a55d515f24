package conformance

import (
	"context"
	"fmt"
	"strings"
)

// checkBaseline: one request with a fresh key succeeds, and the configured
// evidence works: its body names an id (IDField), the id can be looked up
// (VerifyURL), the counter grew by exactly one (CountURL).
func checkBaseline(ctx context.Context, r *runner) Result {
	t, err := r.startTally(ctx)
	if err != nil {
		return failed(nil, "could not read the count: %v", err)
	}
	x := r.send(ctx, call{note: "a request with a fresh key", key: r.newKey(), body: r.intent()})
	ev := r.evidenceOf(x)
	if x.err == nil && x.status >= 400 && r.namesKey(x) {
		return failed(ev, "a request with a fresh key got %d, and the response names the key: the API seems to refuse the key %s (%d characters, -key-format %s), not the request: %s",
			x.status, x.call.key, len(x.call.key), r.cfg.KeyFormat, r.keyFormatHint())
	}
	if !x.ok2xx() {
		return failed(ev, "a request with a fresh key got %s: every check needs an operation that succeeds (check -url, -method, -body and -header)", x.outcome())
	}
	detail := fmt.Sprintf("a fresh key got %d", x.status)
	if r.cfg.Effects.IDField != "" {
		id, ok := r.id(x)
		if !ok {
			return failed(ev, "the %d response has no field %q (-id-field)", x.status, r.cfg.Effects.IDField)
		}
		if err := r.verify(ctx, id); err != nil {
			return failed(ev, "the id %q of the %d response cannot be looked up (-verify-url): %v", id, x.status, err)
		}
		detail += fmt.Sprintf(" naming %s", id)
	}
	if p := r.effectProblem(ctx, t, 1); p != "" {
		return failed(ev, "one %d, but %s: -count-url and -count-field must name a number that grows by one per effect of this endpoint, and nothing else may change it during the run", x.status, p)
	}
	if t.on {
		detail += "; the count grew by 1"
	}
	return passed(r.basis(), "%s", detail)
}

// namesKey reports whether x's body speaks of the key: it holds the key
// itself, the key header's name, or "idempotency key" (in any case, with a
// space, a dash, an underscore or nothing between the words).
func (r *runner) namesKey(x exchange) bool {
	body := strings.ToLower(string(x.body))
	if x.call.key != "" && strings.Contains(body, strings.ToLower(x.call.key)) ||
		strings.Contains(body, strings.ToLower(r.cfg.KeyHeader)) {
		return true
	}
	for _, sep := range []string{" ", "-", "_", ""} {
		if strings.Contains(body, "idempotency"+sep+"key") {
			return true
		}
	}
	return false
}

// keyFormatHint says what to try when the API refuses the checker's keys.
func (r *runner) keyFormatHint() string {
	if r.cfg.KeyFormat == KeyPrefixed {
		return "try -key-format uuid (a plain UUIDv4)"
	}
	return "see which keys the API accepts (-key-format prefixed sends idemcheck-<uuid>, -max-key-len sets the longest the key-invalid check may send)"
}

// checkReplay: the same request twice with one key gets the same status
// and body, the second marked replayed (when the API documents a header
// for that), and one effect.
func checkReplay(ctx context.Context, r *runner) Result {
	t, err := r.startTally(ctx)
	if err != nil {
		return failed(nil, "could not read the count: %v", err)
	}
	key, body := r.newKey(), r.intent()
	x1, res := r.first(ctx, key, body)
	if res != nil {
		return *res
	}
	x2 := r.send(ctx, call{note: "the same request again, same key", key: key, body: body})
	problems := r.replayProblems(x1, x2)
	if p := r.effectProblem(ctx, t, 1); p != "" {
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return failed(r.evidenceOf(x1, x2), "%s", strings.Join(problems, "; "))
	}
	detail := fmt.Sprintf("the repeat got the same %d and body", x2.status)
	if _, named := r.id(x1); !t.on && !named && r.cfg.ReplayedHeader == "" {
		return notApplicable("cannot tell: %s, but the API marks no replay and names no resource, and no count was given: a server that ignores the key and answers every request alike sends the same bytes: give -count-url, -id-field or -replayed-header to decide", detail)
	}
	if r.cfg.ReplayedHeader != "" {
		detail += fmt.Sprintf(", with %s: %s", r.cfg.ReplayedHeader, x2.replayed)
	}
	if t.on {
		detail += "; the count grew by 1"
	}
	return passed(r.basis(), "%s", detail)
}

// replayProblems says how x2 fails to be a replay of x1.
func (r *runner) replayProblems(x1, x2 exchange) []string {
	var out []string
	switch {
	case x2.err != nil:
		out = append(out, "the repeat got "+x2.outcome())
	case x2.status != x1.status:
		out = append(out, fmt.Sprintf("the repeat got %d, the first %d", x2.status, x1.status))
	case !x2.sameAs(x1):
		out = append(out, "the repeat's body differs from the first's")
	}
	id1, ok1 := r.id(x1)
	if id2, ok2 := r.id(x2); ok1 && ok2 && id1 != id2 {
		out = append(out, fmt.Sprintf("it names another resource (%s, then %s): the operation ran twice", id1, id2))
	}
	if h := r.cfg.ReplayedHeader; h != "" && x2.err == nil {
		if !r.marked(x2) {
			out = append(out, fmt.Sprintf("the repeat is not marked with %s (got %q): %s", h, x2.replayed, r.unmarkedAdvice(x2)))
		}
		if r.marked(x1) {
			out = append(out, fmt.Sprintf("the first response has %s: %s", h, x1.replayed))
		}
	}
	return out
}
