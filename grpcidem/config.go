package grpcidem

import (
	"context"
	"strings"

	"github.com/idemkit/idem/internal/rpcidem"
	"github.com/idemkit/idem/server"
)

// MetadataKey is the metadata entry that carries a call's idempotency key
// unless [Config.Key] reads it from the request message.
const MetadataKey = "idempotency-key"

// MetadataReplayed is the header metadata entry, "true", that marks a
// replayed answer.
const MetadataReplayed = "idempotent-replayed"

// The header metadata entries that say where a keyed call's operation
// stands, on its first answer, a replay and a refusal alike
// (docs/CONTRACT.md §4 and §11): the HTTP headers' names, lower-cased.
const (
	// MetadataOperationState is the state: none, in-flight, completed,
	// unavailable, uncertain or unknown.
	MetadataOperationState = rpcidem.MetadataOperationState
	// MetadataOperationRef is the reference an operator looks the
	// operation up by.
	MetadataOperationRef = rpcidem.MetadataOperationRef
	// MetadataSafeNewKey is "true" when nothing was done under the key.
	MetadataSafeNewKey = rpcidem.MetadataSafeNewKey
	// MetadataKeyExpires is the HTTP-date until which the key is kept.
	MetadataKeyExpires = rpcidem.MetadataKeyExpires
)

// Config configures [UnaryServerInterceptor]. Its zero value keys every
// unary call by its idempotency-key metadata entry, in one scope for every
// caller, with the defaults of [server.Config].
type Config struct {
	// Server configures the core as for [server.Middleware]: Keys, Mode,
	// Retention, Lease, WaitBound, MaxRequestBytes (the encoded request
	// message), MaxResponseBytes (the stored result), RejectStatuses (judged
	// against the HTTP status of the answer's code, docs/CONTRACT.md §11),
	// FingerprintHeaders (read from the request metadata), ProblemPrefix,
	// Logger and Hooks. Its Route, Scope and KeyHeader must be zero:
	// the route is the full method name, the scope is [Config.Scope] and
	// the key comes from metadata or [Config.Key].
	Server server.Config
	// Scope gives the tenant and principal a call is made for, from what
	// the application's authentication interceptor put in ctx (never from
	// the message or the key). Nil: every call shares the scope ("", "").
	Scope func(ctx context.Context) (tenant, principal string)
	// Key reads the idempotency key from the request message (AIP-155's
	// request_id); "" means the call has none. Nil: the key is the
	// idempotency-key metadata entry.
	Key func(req any) string
	// Methods says which full method names ("/pkg.Service/Method") are
	// protected. Nil: every unary method.
	Methods func(fullMethod string) bool
	// Metadata names the header and trailer metadata entries stored and
	// replayed with the result, besides none. Names are case-insensitive.
	Metadata []string
}

// allowSet is the lower-cased set of names.
func allowSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[strings.ToLower(n)] = true
	}
	return set
}
