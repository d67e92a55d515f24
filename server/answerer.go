package server

import "time"

// Answerer is the optional interface of an [Exchange] whose framework does
// not answer in HTTP (grpcidem, connectidem): [Adapter.Serve] hands it
// each answer the middleware gives itself, as a value, instead of writing
// a problem document or a replay to the writer it was given, so that the
// framework states it in its own terms without reading HTTP back. What
// the handler answers still goes through [Exchange.Next]'s writer.
type Answerer interface {
	// Refuse takes a refusal: the request was not run, or its outcome
	// did not become durable (docs/CONTRACT.md §4). Serve calls at most
	// one of Refuse and Replay, at most once.
	Refuse(Refusal)
	// Replay takes the operation's stored response for a retry; res must
	// not be modified.
	Replay(res *Response, o Outcome)
}

// Refusal is a refusal of the middleware, as its problem document states
// it (docs/CONTRACT.md §4).
type Refusal struct {
	Problem       string // the problem's name: "key-in-flight", "key-reused", ...
	Status        int    // its HTTP status
	Title, Detail string
	// RetryAfter is how long a retry should wait (Retry-After); 0: not
	// said.
	RetryAfter time.Duration
	Outcome    Outcome
}

// Outcome is where the operation stands, as the Idempotency-Operation-*
// fields of every keyed answer say it (docs/CONTRACT.md §4).
type Outcome struct {
	State      string    // "none", "in-flight", "completed", "uncertain", "unavailable" or "unknown"
	Ref        string    // the operation reference; "" when the request named no valid key
	SafeNewKey bool      // nothing was done under the key: a new key cannot act twice
	Expires    time.Time // when the key is forgotten; zero: not told
}

// outcome is st as an [Outcome].
func (st standing) outcome() Outcome {
	return Outcome{State: st.state, Ref: st.ref, SafeNewKey: st.safe, Expires: st.expires}
}

// handTo hands p to ex when ex is an [Answerer], and reports whether it
// did.
func (p problem) handTo(ex Exchange) bool {
	a, ok := ex.(Answerer)
	if ok {
		a.Refuse(Refusal{Problem: p.name, Status: p.status, Title: p.title, Detail: p.detail,
			RetryAfter: time.Duration(p.retryAfter) * time.Second, Outcome: p.st.outcome()})
	}
	return ok
}
