package server

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/wire"
)

// standing is where an operation stands, as an answer to a keyed request
// tells it (docs/CONTRACT.md §4, "Where the operation stands"): its state,
// the reference of its record, whether a new key is safe, and until when
// the key is kept.
type standing struct {
	state   string    // a wire.State* value
	ref     string    // "" when the request named no valid key
	safe    bool      // nothing was done under the key: a new key cannot act twice
	expires time.Time // zero: not told (no record, or kept until resolved)
}

// OperationRef returns the opaque reference of the operation that tenant,
// principal, route and key name: the hex form of the record's scope hash,
// which answers carry (Idempotency-Operation-Ref) and an operator looks
// the record up by.
func OperationRef(tenant, principal, route, key string) string {
	return refOf(fingerprint.Scope(tenant, principal, route, key))
}

func refOf(scope [32]byte) string { return hex.EncodeToString(scope[:]) }

// refOfEvent is the reference of ev's operation, "" without a key.
func refOfEvent(ev Event) string {
	if ev.Key == "" {
		return ""
	}
	return OperationRef(ev.Tenant, ev.Principal, ev.Route, ev.Key)
}

// write sets the headers of st on h: as h.Set would, the names being
// canonical already, with the values in one allocation.
func (st standing) write(h http.Header) {
	vs := make([]string, 4)
	vs[0], vs[1] = st.state, strconv.FormatBool(st.safe)
	h[wire.HeaderOperationState], h[wire.HeaderSafeNewKey] = vs[0:1:1], vs[1:2:2]
	if st.ref != "" {
		vs[2] = st.ref
		h[wire.HeaderOperationRef] = vs[2:3:3]
	}
	if !st.expires.IsZero() {
		vs[3] = st.expires.UTC().Format(http.TimeFormat)
		h[wire.HeaderKeyExpires] = vs[3:4:4]
	}
}

// info is st as the ErrorInfo metadata entries of a refusal's RPC answer
// (docs/CONTRACT.md §11): the values of its headers; nil when st says
// nothing (protocol-unsupported).
func (st standing) info() map[string]string {
	if st.state == "" {
		return nil
	}
	m := map[string]string{wire.InfoOperationState: st.state, wire.InfoSafeNewKey: strconv.FormatBool(st.safe)}
	if st.ref != "" {
		m[wire.InfoOperationRef] = st.ref
	}
	if !st.expires.IsZero() {
		m[wire.InfoKeyExpires] = st.expires.UTC().Format(http.TimeFormat)
	}
	return m
}

// nothingDone is the standing of a request that did nothing under its key.
func nothingDone(ref string) standing { return standing{state: wire.StateNone, ref: ref, safe: true} }

// standing is where x's operation stands once the middleware did o with
// the handler's response: stored, or rolled back and the key released (a
// rejection of a first [Leased] attempt that recorded no recovery point
// too), or else left with its record for the next attempt to take over.
func (x *runner) standing(o outcome) standing {
	st := standing{ref: refOf(x.c.Scope)}
	released := x.c.Mode == Transactional ||
		o == outcomeReject && x.att.Number() == 1 && !x.ls.pointed.Load()
	switch {
	case o == outcomeStore:
		st.state, st.expires = wire.StateCompleted, x.expires
	case released:
		st.state, st.safe = wire.StateNone, true
	default:
		st.state, st.expires = wire.StateInFlight, x.expires
	}
	return st
}
