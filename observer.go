package idem

import (
	"context"
	"net/http"
	"time"
)

// Attempt describes one attempt of a call, as reported to an [Observer].
type Attempt struct {
	// Request is the request of this attempt, with its Idempotency-Key; the
	// caller's request when no request was built for the attempt (its
	// host's breaker did not let it through, or the context ended first). An observer must not
	// modify it or read its body.
	Request *http.Request
	// Key is the bare idempotency key, "" when the request has none.
	Key string
	// Number counts the requests of the call put on the wire up to and
	// including this attempt (1 for the first); every hook tells an
	// attempt by the same Number, except when the base transport re-sent
	// it by itself (Wire > 1): OnSend, called before, has the count of its
	// first send, and the hooks after it the count of its last. A hedge
	// counts the attempts that ran beside it when it was sent, so a hedge
	// that wins over the first attempt is 2. An attempt that was not sent
	// (its host's breaker refused it, or its body could not be built) has
	// the count of the requests sent before it.
	Number int
	// Wire is how many times the base transport put this attempt on the
	// wire: more than 1 when it re-sent the request by itself on a new
	// connection after a reused keep-alive connection broke (net/http does
	// this for keyed and idempotent requests). Every one counts against
	// [Config.MaxAttempts].
	Wire int
	// Certainty says whether the request reached the server.
	Certainty Certainty
	// Status is the response status, 0 when no response arrived.
	Status int
	// Problem is the problem name of a problem+json response
	// ("key-in-flight", ...), "" otherwise.
	Problem string
	// RetryAfter is the Retry-After of the response, 0 when none.
	RetryAfter time.Duration
	// Err is the transport error, nil when a complete response arrived.
	Err error
	// Elapsed is how long the attempt took.
	Elapsed time.Duration
	// Hedge is true for an attempt sent while an earlier attempt of the
	// call was still running (see [HedgeConfig]).
	Hedge bool
	// Resend says why this attempt re-sends the call's request: the
	// outcome of the attempt it retries and the wait between them. It is
	// zero for a call's first attempt and for a hedge.
	Resend Resend
}

// Resend describes a retry: the outcome of the attempt that was retried,
// and the wait before the retry.
type Resend struct {
	// Certainty, Status and Problem are those of the attempt retried;
	// Certainty is 0 when the attempt is not a retry.
	Certainty Certainty
	Status    int
	Problem   string
	// Wait is the time waited before the retry: a [Classifier]'s wait, the
	// Retry-After (clamped to [Config.MaxRetryAfter]) or the backoff.
	Wait time.Duration
}

// Observer receives the events of every call. Its zero value observes
// nothing; any nil hook is skipped. Hooks run synchronously on the calling
// goroutine, may run concurrently for concurrent calls, and must be quick.
type Observer struct {
	// OnAttempt is called after each attempt.
	OnAttempt func(Attempt)
	// OnRetry is called when an attempt will be retried, before the wait.
	OnRetry func(a Attempt, wait time.Duration)
	// OnGiveUp is called when a call ends with an error; err is the *Error
	// the call returns. A retry denied by the budget, or an attempt refused
	// by an open breaker, is reported here (err matches [ErrBudgetExhausted]
	// or [ErrCircuitOpen]).
	OnGiveUp func(a Attempt, err error)
	// OnBreakerChange is called when the circuit breaker of a host
	// (scheme://host:port) changes state. It may run on any goroutine that
	// made an attempt to that host, and runs while that host's breaker is
	// locked: it must not make a call to the host through the Transport.
	OnBreakerChange func(host string, from, to BreakerState)
	// OnSend, when set, is called just before an attempt is put on the
	// wire (after its host's breaker let it through), with the attempt's
	// context and what is known of the attempt then: Request, Key, Number
	// (this attempt's, counting the requests on the wire before it),
	// Hedge and Resend. The attempt is sent under the context it returns,
	// which must be ctx or derived from it: a tracer starts the attempt's
	// span there, and the base transport's own instrumentation (otelhttp)
	// nests under it. When done is not nil it is called exactly once,
	// when the attempt ended, with the Attempt as OnAttempt describes it
	// (before OnAttempt), also for an attempt that lost a hedged race,
	// which OnAttempt never sees. done may run on another goroutine than
	// OnSend did.
	OnSend func(ctx context.Context, a Attempt) (_ context.Context, done func(Attempt))
}

// seesAttempts reports whether some hook receives Attempts, and so needs
// their Elapsed (which costs two readings of the clock per attempt).
func (o *Observer) seesAttempts() bool {
	return o.OnAttempt != nil || o.OnRetry != nil || o.OnGiveUp != nil || o.OnSend != nil
}

func (o *Observer) attempt(a Attempt) {
	if o.OnAttempt != nil {
		o.OnAttempt(a)
	}
}

func (o *Observer) retry(a Attempt, wait time.Duration) {
	if o.OnRetry != nil {
		o.OnRetry(a, wait)
	}
}

func (o *Observer) giveUp(a Attempt, err error) {
	if o.OnGiveUp != nil {
		o.OnGiveUp(a, err)
	}
}
