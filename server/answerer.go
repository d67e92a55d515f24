package server

import "time"

// answerer is the optional interface of an [Exchange] that takes the
// middleware's own answers as values (the exchange [Adapter.ServeCall]
// wraps): Serve hands it each of them instead of writing a problem
// document or a replay to the writer it was given. What the handler
// answers still goes through [Exchange.Next]'s writer.
type answerer interface {
	// Refuse takes a refusal: the request was not run, or its outcome
	// did not become durable (docs/CONTRACT.md §4). Serve calls at most
	// one of Refuse and Replay, at most once.
	Refuse(Refusal)
	// Replay takes the operation's stored response for a retry; res must
	// not be modified.
	Replay(res *Response, o Outcome)
	// Settled takes where the operation stands once the handler ran and
	// its answer was settled (stored: completed; rolled back or the key
	// released: none; left for a retry to take over: in-flight; a
	// streamed answer: unavailable), before that answer goes out through
	// Next's writer, which then carries no outcome headers. Serve calls
	// it at most once, after Next, and not when the answer could not be
	// settled (Refuse takes that refusal instead).
	Settled(o Outcome)
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

// tell states where the run's operation stands: handed to an [answerer]
// exchange, else written as the headers of the handler's answer.
func (x *runner) tell(st standing) {
	if a, ok := x.ex.(answerer); ok {
		a.Settled(st.outcome())
		return
	}
	st.write(x.w.Header())
}

// handTo hands p to ex when ex is an [answerer], and reports whether it
// did.
func (p problem) handTo(ex Exchange) bool {
	a, ok := ex.(answerer)
	if ok {
		a.Refuse(Refusal{Problem: p.name, Status: p.status, Title: p.title, Detail: p.detail,
			RetryAfter: time.Duration(p.retryAfter) * time.Second, Outcome: p.st.outcome()})
	}
	return ok
}
