package conformance

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// checkBodyMismatch: the same key with a different body is refused (4xx;
// 422 in the IETF draft), neither replayed nor run.
func checkBodyMismatch(ctx context.Context, r *runner) Result {
	if !r.cfg.Body.Varies() {
		return notApplicable("the body template has no {{n}} or {{uuid}}, so every operation sends the same body: add one (in a free-text field such as a reference) to give this check a different body")
	}
	t, err := r.startTally(ctx)
	if err != nil {
		return failed(nil, "could not read the count: %v", err)
	}
	key := r.newKey()
	x1, res := r.first(ctx, key, r.intent())
	if res != nil {
		return *res
	}
	x2 := r.send(ctx, call{note: "the same key with another operation's body", key: key, body: r.intent()})
	ev := r.evidenceOf(x1, x2)
	var verdict string
	switch {
	case x2.err != nil:
		return failed(ev, "the different body got %s", x2.outcome())
	case x2.sameAs(x1) || r.marked(x2):
		return failed(ev, "the different body got the first operation's response (%d): the API does not compare the request with the one the key was first used for", x2.status)
	case x2.ok2xx():
		return failed(ev, "the different body ran as a new operation (%d) under a key already used", x2.status)
	case !x2.refused():
		return failed(ev, "the different body got %d: a used key with a different request must be refused with a 4xx (422 in the IETF draft)", x2.status)
	case x2.status == http.StatusUnprocessableEntity:
		verdict = "refused with 422"
	default:
		verdict = fmt.Sprintf("refused with %d (the IETF draft says 422)", x2.status)
	}
	if p := r.effectProblem(ctx, t, 1); p != "" {
		return failed(ev, "%s, but %s", verdict, p)
	}
	return passed(r.basis(), "%s", verdict)
}

// checkKeyMissing: a request without a key is refused (4xx) and has no
// effect, when the endpoint requires a key (Config.KeyRequired).
func checkKeyMissing(ctx context.Context, r *runner) Result {
	if !r.cfg.KeyRequired {
		return notApplicable("the endpoint is not said to require a key (-key-required)")
	}
	return r.refusedWithoutEffect(ctx, []call{{note: "a request without a key", body: r.intent()}})
}

// checkKeyInvalid: a key one byte over the maximum, and one with a
// non-ASCII character, are refused (4xx) and have no effect. The non-ASCII
// key has the length, in bytes, of the format's keys, so that only its
// characters are wrong: a server that checks the length alone must not
// pass by refusing it for its length.
func checkKeyInvalid(ctx context.Context, r *runner) Result {
	overlong := r.newKey()
	overlong += strings.Repeat("x", max(0, r.cfg.MaxKeyLen+1-len(overlong)))
	overlong = overlong[:r.cfg.MaxKeyLen+1]
	nonASCII := nonASCIIKey(r.newKey())
	return r.refusedWithoutEffect(ctx, []call{
		{note: fmt.Sprintf("a key of %d bytes (-max-key-len %d)", len(overlong), r.cfg.MaxKeyLen), key: overlong, body: r.intent()},
		{note: "a key with a non-ASCII character", key: nonASCII, body: r.intent()},
	})
}

// nonASCIIKey is key with its last two bytes replaced by "ü" (two bytes in
// UTF-8): a key of the format's length in bytes, one character shorter.
func nonASCIIKey(key string) string {
	return key[:len(key)-len("ü")] + "ü"
}

// refusedWithoutEffect sends each call as a new operation and passes when
// every one was refused with a 4xx and the counter did not grow.
func (r *runner) refusedWithoutEffect(ctx context.Context, calls []call) Result {
	t, err := r.startTally(ctx)
	if err != nil {
		return failed(nil, "could not read the count: %v", err)
	}
	var xs []exchange
	var got, problems []string
	for _, c := range calls {
		x := r.send(ctx, c)
		xs = append(xs, x)
		got = append(got, fmt.Sprintf("%s: %s", c.note, x.outcome()))
		if !x.refused() {
			problems = append(problems, fmt.Sprintf("%s got %s, want a 4xx refusal", c.note, x.outcome()))
		}
	}
	if p := r.effectProblem(ctx, t, 0); p != "" {
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return failed(r.evidenceOf(xs...), "%s", strings.Join(problems, "; "))
	}
	return passed(r.basis(), "refused: %s", strings.Join(got, "; "))
}
