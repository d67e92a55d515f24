package server

import "context"

// Operation names the keyed operation whose handler runs under the
// middleware: the record's scope and its Idempotency-Key. Code that the
// handler calls can derive stable names from it, as the outbox derives the
// keys of the messages an operation sends.
type Operation struct {
	// Tenant and Principal are what [Config.Scope] returned for the request.
	Tenant, Principal string
	// Route is the route the record is kept under ("POST /v1/payments").
	Route string
	// Key is the request's Idempotency-Key, without sf-string quotes.
	Key string
	// Attempt is 1 for the first attempt of the operation, and n for the
	// n-th attempt of a [Leased] operation after n-1 takeovers.
	Attempt int
}

// runnerKey is the context key of the runner of a claimed request.
type runnerKey struct{}

func runnerFrom(ctx context.Context) *runner {
	x, _ := ctx.Value(runnerKey{}).(*runner)
	return x
}

// OperationFrom returns the operation that ctx's request runs, while its
// handler runs under the middleware. It returns false for a request that
// claimed no key (a safe method, an unkeyed request under [KeyOptional], a
// bypassed route) and outside the middleware.
func OperationFrom(ctx context.Context) (Operation, bool) {
	x := runnerFrom(ctx)
	if x == nil {
		return Operation{}, false
	}
	return Operation{Tenant: x.c.Tenant, Principal: x.c.Principal, Route: x.c.Route, Key: x.c.Key,
		Attempt: x.att.Number()}, true
}
