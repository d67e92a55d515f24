package idem

import (
	"net/http"
	"strconv"
	"time"
)

// A [Classifier] teaches the client an API's own dialect: it decides what
// follows an attempt before the default rules do (the table in the package
// doc and docs/CONTRACT.md §8), and returns the zero Decision to leave the
// attempt to them. Set one for every call with [Config.Classifier], or for
// the calls under a context with [WithClassifier]; the call's own is asked
// first.
//
// A Classifier is not asked about an attempt that the host's breaker
// refused, whose request body could not be rebuilt, or that the caller's
// context ended. It must not keep the Outcome's Request, Header or Body
// after it returns, nor modify them, and it must be safe for concurrent
// use. See ExampleClassifier for Stripe's dialect.
type Classifier func(Outcome) Decision

// Outcome is what a [Classifier] sees of an attempt.
type Outcome struct {
	// Request is the attempt's request, with its key header. Read only.
	Request *http.Request
	// Key is the bare idempotency key, "" when the request has none.
	Key string
	// Attempts counts the requests the call put on the wire so far.
	Attempts int
	// Certainty says whether the request reached the server. An attempt
	// that is not Responded has no Status, Header or Body.
	Certainty Certainty
	// Err is the transport error, or the error of a body cut short.
	Err error
	// Status and Header are the response's.
	Status int
	Header http.Header
	// Body is the part of the response body that was read ahead: the whole
	// body (up to [Config.MaxBufferedBody]) for a call that may be retried,
	// and for every 4xx and 5xx the first 16 KiB when a [Classifier] is set;
	// nil when none was read. The response returned to the caller still
	// carries the whole body.
	Body []byte
	// Problem is the problem name of an application/problem+json response
	// ("key-in-flight", ...), "" otherwise.
	Problem string
}

// Decision is a [Classifier]'s verdict on an attempt. The zero Decision
// defers to the default rules.
type Decision struct {
	// Verdict says what follows.
	Verdict Verdict
	// Wait, for Retry and InFlight, is the wait before the next attempt.
	// Zero means the default: the response's Retry-After (clamped to
	// [Config.MaxRetryAfter]), else the backoff. The call's deadline still
	// bounds it.
	Wait time.Duration
	// Err, for Fail, is the Reason of the call's *Error, which errors.Is
	// matches: a sentinel of this package ([ErrKeyReused], ...) or the
	// caller's own.
	Err error
}

// Verdict names what follows an attempt.
type Verdict int

const (
	// Defer leaves the attempt to the default rules.
	Defer Verdict = iota
	// Retry makes another attempt, after [Decision.Wait], within
	// [Config.MaxAttempts], the budget and the deadline. A request body that
	// cannot be re-sent ends the call with [ErrNotRewindable]. An ambiguous
	// attempt of a request that has neither a key nor an idempotent method
	// is not retried whatever a [Classifier] says (nothing shows that it did
	// not take effect): the call fails with [ErrOutcomeUnknown].
	Retry
	// InFlight is Retry for an operation that is still running under the
	// request's key, as 409 key-in-flight: the operation may have taken
	// effect, and when the attempts run out the call fails with
	// [ErrKeyInFlight]. A request without a key gets the response (Stop).
	InFlight
	// Stop returns the attempt's response as it is. An attempt without a
	// response ends the call with an *Error whose Err is the transport
	// error.
	Stop
	// Fail ends the call with an *Error whose Reason is [Decision.Err]. The
	// response, if any, is drained and closed.
	Fail
)

// String returns the verdict's name: "Defer", "Retry", "InFlight", "Stop"
// or "Fail".
func (v Verdict) String() string {
	switch v {
	case Defer:
		return "Defer"
	case Retry:
		return "Retry"
	case InFlight:
		return "InFlight"
	case Stop:
		return "Stop"
	case Fail:
		return "Fail"
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}
