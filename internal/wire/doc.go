// Package wire holds the parts of the idem contract (docs/CONTRACT.md) that
// the client, the server and the testserver must agree on
// byte for byte: header names, the Idempotency-Key syntax, Retry-After and
// the RFC 9457 problem documents. It has no state and is safe for concurrent
// use.
package wire

// Header names of the contract.
const (
	// HeaderKey carries the idempotency key of a request, unless the
	// client, the server and the testserver are configured with another
	// name (their Config.KeyHeader).
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is "true" on a response that the server replayed from
	// its store instead of running the handler.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderRetryAfter is the standard Retry-After response header.
	HeaderRetryAfter = "Retry-After"
)
