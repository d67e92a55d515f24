package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
)

// checkEquivalentJSON reports, as information, what the API does with the
// same key and an equivalent JSON body (fields reordered, other
// whitespace): replay it (it compares canonical JSON, as the idem contract
// says, unless it replays another operation's body too: it compares
// nothing) or refuse it (it compares bytes). APIs differ; both are safe.
func checkEquivalentJSON(ctx context.Context, r *runner) Result {
	body := r.intent()
	alt, ok := equivalentJSON(body)
	if !ok {
		return notApplicable("the body is not a JSON object")
	}
	key := r.newKey()
	x1, res := r.first(ctx, key, body)
	if res != nil {
		return *res
	}
	x2 := r.send(ctx, call{note: "the same key, the same JSON reordered and re-spaced", key: key, body: alt})
	res2 := Result{Verdict: Info, Basis: basisBodies, Evidence: r.evidenceOf(x1, x2)}
	switch {
	case x2.sameAs(x1) && r.cfg.Body.Varies():
		// A replay shows a comparison by meaning only if another body is
		// not replayed too.
		x3 := r.send(ctx, call{note: "the same key with another operation's body", key: key, body: r.intent()})
		res2.Evidence = append(res2.Evidence, r.evidence(x3))
		res2.Detail = "replayed: the API compares JSON bodies by meaning, not bytes"
		if x3.sameAs(x1) || r.marked(x3) {
			res2.Detail = "replayed, but so is another operation's body: the API does not compare bodies (see body-mismatch)"
		}
	case x2.sameAs(x1):
		res2.Detail = "replayed: the API compares JSON bodies by meaning, or not at all (the body template has no placeholder to tell which)"
	case x2.refused():
		res2.Detail = "refused with " + x2.outcome() + ": the API compares bytes, so clients must resend the exact bytes of the first request"
	case x2.ok2xx():
		res2.Detail = "answered " + x2.outcome() + " with another response: the equivalent body ran as a new operation"
	default:
		res2.Detail = "answered " + x2.outcome()
	}
	return res2
}

// equivalentJSON returns body, a JSON object, with its members in reverse
// order, indented, and with spaces around the colons: the same JSON, other
// bytes. Members' values (numbers included) are kept as written. ok is
// false when body is not one JSON object.
func equivalentJSON(body []byte) (out []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	type member struct {
		name  []byte
		value json.RawMessage
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		name, isString := tok.(string)
		if err != nil || !isString {
			return nil, false
		}
		var m member
		if m.name, err = json.Marshal(name); err != nil || dec.Decode(&m.value) != nil {
			return nil, false
		}
		members = append(members, m)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i := len(members) - 1; i >= 0; i-- {
		b.WriteString("    ")
		b.Write(members[i].name)
		b.WriteString(" : ")
		b.Write(members[i].value)
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.Bytes(), true
}
