package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// RefReader is the optional interface of a [RecordStore] that reads a
// record by its operation reference (the Idempotency-Operation-Ref of its
// answers, see [OperationRef]), which is the hash of its scope: an
// operator who holds only what a client or a log showed finds the record
// with it. [PostgresStore], [MemoryStore] and idemredis's Store implement
// it; an [Operator] over a store that does not answers
// [Operator.LookupRef] with an error that wraps [errors.ErrUnsupported].
// Implementations must be safe for concurrent use.
type RefReader interface {
	// ReadRef returns the record whose scope hash is scope, as
	// [RecordStore.ReadRecord] would return it (payload likewise), or an
	// error that wraps [ErrUnknownKey] when there is none. ctx governs the
	// call.
	ReadRef(ctx context.Context, scope [32]byte, payload bool) (Record, error)
}

var (
	_ RefReader = (*PostgresStore)(nil)
	_ RefReader = (*MemoryStore)(nil)
)

// LookupRef returns the record whose operation reference is ref (64 hex
// digits, as answers carry it), with its payload when payload is true,
// less the headers no replay sends, as [Operator.Lookup] does. Errors:
// [ErrBadScope] for a ref that is not a reference, [ErrUnknownKey],
// [errors.ErrUnsupported] when the store is not a [RefReader], and the
// store's. ctx governs the call.
func (o *Operator) LookupRef(ctx context.Context, ref string, payload bool) (Record, error) {
	scope, err := ParseOperationRef(ref)
	if err != nil {
		return Record{}, err
	}
	rr, ok := o.store.(RefReader)
	if !ok {
		return Record{}, fmt.Errorf("server: this store cannot look a record up by its reference (it does not implement server.RefReader): %w",
			errors.ErrUnsupported)
	}
	rec, err := rr.ReadRef(ctx, scope, payload)
	if err != nil {
		return Record{}, err
	}
	return o.shown(rec), nil
}

// ParseOperationRef returns the scope hash that ref (an operation
// reference, see [OperationRef]) names, or an error that wraps
// [ErrBadScope]. Surrounding space and upper-case digits are accepted.
func ParseOperationRef(ref string) ([32]byte, error) {
	var scope [32]byte
	ref = strings.ToLower(strings.TrimSpace(ref))
	if len(ref) != 2*len(scope) {
		return scope, fmt.Errorf("%w: an operation reference is 64 hex digits, got %d characters", ErrBadScope, len(ref))
	}
	if _, err := hex.Decode(scope[:], []byte(ref)); err != nil {
		return scope, fmt.Errorf("%w: an operation reference is 64 hex digits: %v", ErrBadScope, err)
	}
	return scope, nil
}

// unknownRef is the error of a reference that names no record.
func unknownRef(scope [32]byte) error {
	return fmt.Errorf("%w (operation reference %s)", ErrUnknownKey, refOf(scope))
}
