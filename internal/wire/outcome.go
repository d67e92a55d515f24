package wire

// The outcome of a keyed answer (docs/CONTRACT.md §4, "Where the operation
// stands"): the operation's state, an opaque reference to its record, and
// whether sending the same intent under a new key is safe. The server sends
// them as headers on every answer to a keyed request, and as members of
// every problem document it writes.
const (
	// HeaderOperationState carries one of the State* values.
	HeaderOperationState = "Idempotency-Operation-State"
	// HeaderOperationRef carries the operation's reference, which an
	// operator looks the record up by (idemctl, the admin page).
	HeaderOperationRef = "Idempotency-Operation-Ref"
	// HeaderSafeNewKey is "true" when nothing was done under the key, so a
	// new key cannot act twice, and "false" otherwise.
	HeaderSafeNewKey = "Idempotency-Safe-New-Key"
	// HeaderKeyExpires is the HTTP-date until which the server keeps the
	// key's record: a retry after it may run the operation again.
	HeaderKeyExpires = "Idempotency-Key-Expires"
)

// Operation states of the contract.
const (
	// StateNone: no record holds this request under its key; nothing ran.
	StateNone = "none"
	// StateInFlight: an attempt holds the key, or left it to be taken over.
	StateInFlight = "in-flight"
	// StateCompleted: the operation completed and its response is stored.
	StateCompleted = "completed"
	// StateUnavailable: the operation completed; its response was not stored.
	StateUnavailable = "unavailable"
	// StateUncertain: no one could tell whether the operation acted; it
	// waits for an operator, and nothing runs under the key until then.
	StateUncertain = "uncertain"
	// StateUnknown: the server could not learn the state (its store failed).
	StateUnknown = "unknown"
)
