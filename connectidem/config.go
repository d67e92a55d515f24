package connectidem

import (
	"context"
	"net/http"

	"github.com/idemkit/idem/server"
)

// Config configures [NewServerInterceptor]. Its zero value keys every
// unary call by its Idempotency-Key header, in one scope for every
// caller, with the defaults of [server.Config].
type Config struct {
	// Server configures the core as for [server.Middleware]: Keys, Mode,
	// Retention, Lease, WaitBound, MaxRequestBytes (the encoded request
	// message), MaxResponseBytes (the stored result), RejectStatuses
	// (judged against the HTTP status of the answer's code,
	// docs/CONTRACT.md §11), FingerprintHeaders, ProblemPrefix, Logger and
	// Hooks. Its Route, Scope and KeyHeader must be zero.
	Server server.Config
	// Scope gives the tenant and principal a call is made for, from what
	// the application's authentication put in ctx. Nil: every call shares
	// the scope ("", "").
	Scope func(ctx context.Context) (tenant, principal string)
	// Key reads the idempotency key from the request message (AIP-155's
	// request_id); "" means the call has none. Nil: the Idempotency-Key
	// header.
	Key func(req any) string
	// Headers names the response headers and trailers stored and replayed
	// with the result. Nil: none.
	Headers []string
}

// allowSet is the canonical set of names.
func allowSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[http.CanonicalHeaderKey(n)] = true
	}
	return set
}
