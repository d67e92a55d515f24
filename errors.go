package idem

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. A call that fails returns an *Error; errors.Is matches it
// against the sentinel that names why it ended (its Reason) and against its
// cause (its Err), for example context.Canceled or a *net.OpError.
var (
	// ErrKeyInvalid: a caller-supplied key is not 1 to 255 printable ASCII
	// characters (nothing was sent), or the server answered 400 key-invalid.
	ErrKeyInvalid = errors.New("idem: invalid idempotency key")
	// ErrKeyMissing: the server requires an Idempotency-Key on this route and
	// the request had none (it was opted out with [WithoutKey]).
	ErrKeyMissing = errors.New("idem: server requires an idempotency key")
	// ErrKeyReused: the server holds a different request under this key
	// (422 key-reused). The request was not executed; never retried.
	ErrKeyReused = errors.New("idem: idempotency key reused with a different request")
	// ErrKeyInFlight: the first request with this key was still running on
	// the server (409 key-in-flight) when the attempts or the time ran out.
	ErrKeyInFlight = errors.New("idem: request with this key still in flight")
	// ErrResultUnavailable: the operation took effect on the server, but its
	// response was not stored (too large, or streamed), so it cannot be
	// replayed (500 result-unavailable). Never retried.
	ErrResultUnavailable = errors.New("idem: operation took effect but its result cannot be replayed")
	// ErrOutcomeUncertain: the server could not tell whether the operation
	// took effect and holds it for a person to settle (409
	// outcome-uncertain): never retried, and the intent must not be sent
	// again under a new key. Quote [Error.OperationRef] to the service's
	// support. It matches [ErrOutcomeUnknown] too.
	ErrOutcomeUncertain = errors.New("idem: outcome uncertain: the server holds the operation for an operator to settle")
	// ErrOutcomeUnknown matches every *Error whose request may have taken
	// effect on the server (see [Error.MayHaveTakenEffect]), for example a
	// request that was written but got no complete response and was not (or
	// no longer) safe or possible to retry.
	ErrOutcomeUnknown = errors.New("idem: outcome unknown")
	// ErrNotRewindable: the request body cannot be re-read (no GetBody, or
	// longer than [Config.BufferRequestBody]), so the request was not retried
	// after it had been written; the error's Detail says which.
	ErrNotRewindable = errors.New("idem: request body cannot be re-sent")
	// ErrDeadline: the next wait (backoff or Retry-After) would end past the
	// context deadline, so the call gave up at once instead of sleeping into
	// a certain failure.
	ErrDeadline = errors.New("idem: retry would outlast the context deadline")
	// ErrAttemptsExhausted: every attempt allowed by [Config.MaxAttempts]
	// failed, and there is no response that tells the outcome: the last
	// attempt got none, or an earlier one may have acted (see doc.go).
	ErrAttemptsExhausted = errors.New("idem: attempts exhausted")
)

// Certainty says what is known about whether a request reached the server.
type Certainty int

const (
	// NotSent: the request was certainly not written, so the server
	// cannot have acted: no connection was made (dial refused, DNS, TLS
	// handshake, proxy CONNECT), the host's breaker refused the attempt, or
	// its body could not be rebuilt. See [Config.Base] for what a base
	// transport must preserve for idem to know.
	NotSent Certainty = iota + 1
	// Ambiguous: the request was (perhaps partly) written but no complete
	// response arrived (timeout, reset, EOF, a body cut short), or the
	// base transport hid whether it was written. The server may have
	// acted.
	Ambiguous
	// Responded: a complete response arrived.
	Responded
)

// String returns "not sent", "ambiguous" or "responded".
func (c Certainty) String() string {
	switch c {
	case NotSent:
		return "not sent"
	case Ambiguous:
		return "ambiguous"
	case Responded:
		return "responded"
	}
	return fmt.Sprintf("Certainty(%d)", int(c))
}

// Error is the error of a call that ended without a response to return. It
// carries what a caller needs to decide what to do next. errors.Is matches
// its Reason, its Err, and [ErrOutcomeUnknown] when MayHaveTakenEffect.
type Error struct {
	Method string // the request's method
	URL    string // the request's URL, without its query string
	Key    string // the idempotency key sent, "" when the request had none
	// Attempts counts the requests this call put on the wire, including
	// re-sends made by the base transport on a broken keep-alive connection.
	Attempts int
	// Certainty describes the last attempt.
	Certainty Certainty
	// Status is the last HTTP status received, 0 when none.
	Status int
	// RetryAfter is the last Retry-After received (before clamping), 0 when none.
	RetryAfter time.Duration
	// Reason is the sentinel that names why the call ended ([ErrKeyReused],
	// [ErrDeadline], ...); nil when the cause alone explains it.
	Reason error
	// Err is the underlying cause: the last transport error, or a context
	// error; nil when the call ended on a response.
	Err error
	// Detail adds a sentence of explanation to the message.
	Detail string
	// Waited is how long the call waited for local refusals to pass (its
	// host's breaker, the retry budget), sending nothing; 0 when it did
	// not wait. The waits before retries (backoff, Retry-After) do not
	// count.
	Waited time.Duration
	// OperationState and OperationRef are where the operation stands and
	// its reference, as the server's last answer said them
	// (Idempotency-Operation-State and -Ref, docs/CONTRACT.md §4); "" when
	// it said nothing.
	OperationState, OperationRef string
	// MayHaveTakenEffect is true when the server may have acted on the
	// operation in any attempt of the call: an attempt was ambiguous, or a
	// response said the operation is running or ran (409 key-in-flight, 500
	// result-unavailable, 409 outcome-uncertain), or a 5xx arrived (a proxy
	// or gateway may answer 5xx for a request that ran), or the server's
	// last answer said a new key is not safe (Idempotency-Safe-New-Key:
	// false). False means it certainly did not act: a
	// retry with a new key, or a different request, is safe.
	MayHaveTakenEffect bool
}

// Error returns a message naming the request, why the call ended, the
// attempts made, the last status and the cause.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "idem: %s %s: ", e.Method, e.URL)
	if e.Reason != nil {
		b.WriteString(strings.TrimPrefix(e.Reason.Error(), "idem: "))
	} else {
		b.WriteString("failed")
	}
	if e.Detail != "" {
		b.WriteString(" (" + e.Detail + ")")
	}
	fmt.Fprintf(&b, "; %d attempt", e.Attempts)
	if e.Attempts != 1 {
		b.WriteByte('s')
	}
	fmt.Fprintf(&b, ", last %s", e.Certainty)
	if e.Status != 0 {
		fmt.Fprintf(&b, " with status %d", e.Status)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, ", Retry-After %s", e.RetryAfter)
	}
	if e.MayHaveTakenEffect && e.Reason != ErrResultUnavailable && e.Reason != ErrOutcomeUncertain {
		b.WriteString("; outcome unknown: the request may have taken effect")
	}
	if e.Key != "" {
		fmt.Fprintf(&b, "; idempotency key %s", e.Key)
	}
	if e.OperationRef != "" {
		fmt.Fprintf(&b, "; operation %s, %s", e.OperationRef, e.OperationState)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the reason and the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Reason != nil {
		errs = append(errs, e.Reason)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Is reports whether target is [ErrOutcomeUnknown] and the operation may
// have taken effect; other targets are matched through Unwrap.
func (e *Error) Is(target error) bool {
	return target == ErrOutcomeUnknown && e.MayHaveTakenEffect
}
