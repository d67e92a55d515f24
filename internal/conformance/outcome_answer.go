package conformance

import (
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// knownStates are the operation states of the contract.
var knownStates = []string{wire.StateNone, wire.StateInFlight, wire.StateCompleted, wire.StateUnavailable,
	wire.StateUncertain, wire.StateUnknown}

// answer checks what x, labelled what, tells of its operation: a known
// state (want, unless ""), a safe-new-key flag true only with state none,
// the reference of the key's first answer, a key expiry after the answer's
// Date, and problem members that agree with the headers.
func (a *outcomeAudit) answer(x exchange, what, want string) {
	if x.err != nil {
		return
	}
	state, ref := x.header.Get(wire.HeaderOperationState), x.header.Get(wire.HeaderOperationRef)
	safe := x.header.Get(wire.HeaderSafeNewKey)
	switch {
	case state == "":
		a.fail(x, "%s (%d) carries no %s: every keyed answer must", what, x.status, wire.HeaderOperationState)
	case !slices.Contains(knownStates, state):
		a.fail(x, "%s (%d) has %s %q, not a state of the contract", what, x.status, wire.HeaderOperationState, state)
	case want != "" && state != want:
		a.fail(x, "%s (%d) says the operation is %s, want %s", what, x.status, state, want)
	}
	if safe != "" && state != "" && (safe == "true") != (state == wire.StateNone) {
		a.fail(x, "%s (%d) has %s: %s with state %s: a new key is safe only when nothing was done (state none)",
			what, x.status, wire.HeaderSafeNewKey, safe, state)
	}
	if x.call.key == a.key && a.ref != "" && ref != a.ref {
		a.fail(x, "%s (%d) carries reference %q, the key's first answer %q: a reference must stay the same for the operation",
			what, x.status, ref, a.ref)
	}
	a.expiry(x, what)
	a.members(x, what, state, ref, safe)
}

// expiry checks that x's key expiry, when it has one, is a date after the
// answer's (the checker's clock without a Date).
func (a *outcomeAudit) expiry(x exchange, what string) {
	v := x.header.Get(wire.HeaderKeyExpires)
	if v == "" {
		return
	}
	exp, err := http.ParseTime(v)
	if err != nil {
		a.fail(x, "%s (%d) has %s %q, not an HTTP-date", what, x.status, wire.HeaderKeyExpires, v)
		return
	}
	now, err := http.ParseTime(x.date)
	if err != nil {
		now = a.r.now()
	}
	if !exp.After(now) {
		a.fail(x, "%s (%d) says the key expires at %s, not after the answer's own date %s: a client would stop retrying at once",
			what, x.status, v, now.UTC().Format(time.RFC1123))
	}
}

// members checks that a problem document's operation_state, operation_ref
// and safe_new_key, when present, say what x's headers say.
func (a *outcomeAudit) members(x exchange, what, state, ref, safe string) {
	mt, _, _ := mime.ParseMediaType(x.header.Get("Content-Type"))
	if mt != "application/problem+json" {
		return
	}
	var p struct {
		State *string `json:"operation_state"`
		Ref   *string `json:"operation_ref"`
		Safe  *bool   `json:"safe_new_key"`
	}
	if json.Unmarshal(x.body, &p) != nil {
		return
	}
	switch {
	case p.State != nil && *p.State != state:
		a.fail(x, "%s (%d): the problem's operation_state %q, the header %q", what, x.status, *p.State, state)
	case p.Ref != nil && *p.Ref != ref:
		a.fail(x, "%s (%d): the problem's operation_ref %q, the header %q", what, x.status, *p.Ref, ref)
	case p.Safe != nil && safe != "" && (*p.Safe) != (safe == "true"):
		a.fail(x, "%s (%d): the problem's safe_new_key %t, the header %q", what, x.status, *p.Safe, safe)
	}
}
