// Package idem makes HTTP retries safe for operations that must happen at
// most once: payments, orders, transfers.
//
// A client that times out cannot know whether the server acted. idem closes
// that gap: its Transport gives every logical operation one Idempotency-Key
// (a UUIDv4 by default) and sends that same key on every retry, so that a
// server built with package server (or any API that honours the key) runs
// the operation once and replays its stored response to the retries.
//
// Wrap a client:
//
//	client := idem.NewClient(idem.Config{})
//	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
//	defer cancel()
//	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
//	resp, err := client.Do(req) // retried with one key, inside the 10 s
//
// # What is retried
//
// Every attempt ends in one of three states (Certainty): NotSent (no
// connection was made, so the server cannot have acted), Ambiguous (the
// request was written but no complete response arrived), or Responded.
// idem sees whether a connection was made in net/http's connection trace,
// carried by the request's context: a [Config.Base] wrapper must pass that
// context down, or its errors are ambiguous unless their type shows a
// failure before sending (see [Config].Base).
//
// What follows each outcome is one table, in outcomes.go (and
// docs/CONTRACT.md §8), which the retry loop, the read-ahead of response
// bodies and the circuit breaker all read:
//
//   - NotSent: retried, whatever the method.
//   - Ambiguous: retried when the request carries a key or its method is
//     idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE); otherwise the call
//     fails with an error matching ErrOutcomeUnknown.
//   - 408, 429, 500, 502, 503, 504: retried (keyed or idempotent), honouring
//     Retry-After. When the attempts run out, the last response is returned,
//     unless an earlier attempt may have acted (a 5xx, a lost response): the
//     last response then says nothing of the outcome, and the call fails
//     with ErrAttemptsExhausted, which matches ErrOutcomeUnknown.
//   - 409 key-in-flight: the first request with the key is still running;
//     retried with the same key after Retry-After.
//   - 422 key-reused, 400 key-missing or key-invalid, 500 result-unavailable:
//     never retried; errors matching ErrKeyReused, ErrKeyMissing,
//     ErrKeyInvalid, ErrResultUnavailable.
//   - Any other response is returned as it is.
//
// An API with a dialect of its own (Stripe's JSON 409
// idempotency_key_in_use and Stripe-Should-Retry header, say) is taught
// with a [Classifier] ([Config.Classifier], or [WithClassifier] for one call),
// asked before the table: it may say Retry, InFlight, Stop or Fail, or
// Defer to the table. An API that carries the key in another header
// (X-Idempotency-Key, PayPal-Request-Id) is named by [Config.KeyHeader].
//
// Which requests get a key: every request whose method is not idempotent
// (POST, PATCH, ...) gets a fresh key per call, unless the caller set the
// header, named a key with [WithKey], or opted out with [WithoutKey]. The key sent
// is on resp.Request.Header, on the [Observer]'s Attempt, and on *Error. One
// call of RoundTrip is one logical operation: an application that retries
// the operation itself, or resends it after a restart, must store the key
// and pass it with WithKey.
//
// # Per-call options
//
// The request's context carries options for its call: WithKey and
// WithoutKey (the key), [WithMaxAttempts] and [WithoutRetry] (the attempts),
// [WithCritical] (exempt from the retry budget), [WithFailFast] (no waiting for
// the breaker or the budget), WithClassifier and [WithHedging]. A context
// without them changes nothing.
//
// # Time
//
// The request's context bounds the whole call, retries and waits included.
// A wait (full-jitter backoff, or the server's Retry-After clamped to
// [Config.MaxRetryAfter]) that would end past the context's deadline is not
// started: the call fails at once with [ErrDeadline]. [Config.AttemptTimeout]
// optionally bounds each attempt, until its response body is closed.
//
// # Protecting the server
//
// Retries must not sink a service that is already failing, and a short
// outage must not fail the calls that could outlast it. Every retry spends a
// token from a Budget, earned by answers (by default each attempt that got
// a response the call does not retry earns two retries, plus a floor of 10
// retries per second): a brownout is funded, while in a full outage retries
// add only the floor. Each attempt also passes the circuit breaker of its
// host (sony/gobreaker, one per scheme://host:port): after repeated
// failures it opens, and nothing is sent to the host until its open period
// (the server's Retry-After, or 1 s doubling up to 5 s) has passed and a
// probe succeeded.
//
// A call that meets an open breaker, or a retry that finds no token, waits
// for them, sending nothing, as gRPC's wait-for-ready queues an RPC until
// its channel is ready: the context's deadline still applies, and
// [Config.MaxWait] bounds the waiting. A call whose deadline comes before the
// breaker's open period ends does not wait at all (x/time/rate's Wait
// rule): it fails at once with [ErrCircuitOpen]. When the host recovers, the
// calls that waited are released oldest first at a pace the host's answers
// set (see [BreakerConfig]). A worker with other work to do makes its calls
// fail-fast instead ([Config.FailFast], WithFailFast): they end at once with
// ErrCircuitOpen or [ErrBudgetExhausted]. [Error.Waited] says how long a call
// waited. The stack, from the caller down: key attachment, the retry loop
// (asking the budget before each retry), the breaker (around each attempt),
// the base transport.
//
// # Counting attempts
//
// net/http's Transport itself re-sends a keyed or idempotent request on a
// new connection when a reused keep-alive connection turns out to be broken
// before a response arrived. Such re-sends happen inside one call of the
// base transport; idem counts each of them (it traces the connections
// used), reports them to the Observer ([Attempt.Wire]) and counts them against
// [Config.MaxAttempts], so that MaxAttempts bounds the requests on the wire.
//
// # Hedging
//
// With [Config.Hedge], a GET (or another idempotent request, or a keyed one
// under WithHedging) whose attempt has not completed after a delay (fixed,
// or a percentile of the host's recent latencies) gets a second attempt
// beside it; the first complete response wins and the other is cancelled.
// Hedges spend the retry budget and count toward MaxAttempts, and the
// hedges in flight to a host are bounded by a share of its attempts in
// flight ([HedgeConfig.InFlightShare]). Hedging is off by default.
//
// # Bodies
//
// A request body is re-sent from GetBody, which http.NewRequest sets for
// bytes.Reader, bytes.Buffer and strings.Reader bodies. A body without
// GetBody is sent at most once: it is retried only when the attempt was not
// sent, and otherwise the call fails with [ErrNotRewindable], unless
// [Config.BufferRequestBody] lets idem read it into memory first (up to a
// cap; a longer body is sent once). The response body of a retry-safe
// request is read ahead (up to [Config.MaxBufferedBody]) so that a body cut
// short by the network is retried rather than returned.
package idem
