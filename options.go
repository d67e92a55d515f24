package idem

import "context"

// Per-call options travel in the request's context, set by the With...
// functions of this file and of keys.go ([WithKey], [WithoutKey]). Each returns
// a child context that keeps the options its parent set and changes one;
// a context without options changes nothing.

// callOptions is what a context says about its calls. Its zero value
// changes nothing.
type callOptions struct {
	key         string     // WithKey's key
	named       bool       // WithKey
	optOut      bool       // WithoutKey
	maxAttempts int        // WithMaxAttempts, WithoutRetry; 0: Config.MaxAttempts
	critical    bool       // WithCritical
	hedge       bool       // WithHedging
	classifier  Classifier // WithClassifier
	failFast    bool       // WithFailFast
}

type optionsKey struct{}

// optionsOf returns the options of ctx, the zero value when it has none.
func optionsOf(ctx context.Context) callOptions {
	o, _ := ctx.Value(optionsKey{}).(callOptions)
	return o
}

// withOption returns a child of ctx whose options are ctx's, changed by set.
func withOption(ctx context.Context, set func(*callOptions)) context.Context {
	o := optionsOf(ctx)
	set(&o)
	return context.WithValue(ctx, optionsKey{}, o)
}

// WithMaxAttempts returns a context whose calls put at most n requests on
// the wire, the first included, in place of [Config.MaxAttempts] (hedges
// count). n <= 0 leaves the bound as it was.
func WithMaxAttempts(ctx context.Context, n int) context.Context {
	if n <= 0 {
		return ctx
	}
	return withOption(ctx, func(o *callOptions) { o.maxAttempts = n })
}

// WithoutRetry returns a context whose calls make one attempt: no retry
// and no hedge, as WithMaxAttempts(ctx, 1). The key is still sent. A
// re-send that net/http's Transport makes by itself on a broken keep-alive
// connection is not idem's to prevent (see [Config.MaxAttempts]).
func WithoutRetry(ctx context.Context) context.Context {
	return withOption(ctx, func(o *callOptions) { o.maxAttempts = 1 })
}

// WithCritical returns a context whose calls are exempt from the retry
// budget: their retries and hedges are never denied by it (they still take
// a token when one is left, so that the budget sees their load). Keep it for
// the few calls whose failure costs more than the load their retries add to
// a failing service.
func WithCritical(ctx context.Context) context.Context {
	return withOption(ctx, func(o *callOptions) { o.critical = true })
}

// WithClassifier returns a context whose calls ask c about each attempt
// before [Config.Classifier] and the default rules (see [Classifier]). A nil c
// removes a classifier set on ctx's ancestors.
func WithClassifier(ctx context.Context, c Classifier) context.Context {
	return withOption(ctx, func(o *callOptions) { o.classifier = c })
}

// WithHedging returns a context whose keyed calls may be hedged whatever
// their method, when [Config.Hedge] enables hedging: the server's replay of
// the key makes a second copy of the request safe. Without it only
// idempotent methods (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) are hedged.
// Use it only with a server that honours the key for concurrent requests
// (the second copy gets 409 key-in-flight or waits, never runs twice).
func WithHedging(ctx context.Context) context.Context {
	return withOption(ctx, func(o *callOptions) { o.hedge = true })
}

// WithFailFast returns a context whose calls never wait for a local
// refusal to pass, as [Config.FailFast]: an attempt that its host's circuit
// breaker refuses ends the call at once with [ErrCircuitOpen], and a retry
// that the retry budget denies with [ErrBudgetExhausted]. A worker that has
// other work to do (an outbox dispatcher) wants this; a caller that waits
// for its answer does not.
func WithFailFast(ctx context.Context) context.Context {
	return withOption(ctx, func(o *callOptions) { o.failFast = true })
}
