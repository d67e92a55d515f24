package outbox

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/google/uuid"

	"github.com/idemkit/idem/server"
)

// keyPrefix starts every derived key and names the derivation's version.
const keyPrefix = "ob1-"

// DeriveKey returns the Idempotency-Key that [Outbox.Enqueue] gives a
// message named name, enqueued by the keyed operation op when
// [Message.Key] is empty:
//
//	"ob1-" + hex(SHA-256("idem-outbox-v1", op.Tenant, op.Principal, op.Route, op.Key, name))
//
// where each field is preceded by its length in bytes as a big-endian
// uint64. The result is 68 printable ASCII characters. It depends on the
// operation's scope and Idempotency-Key and on the message's name only
// (not on op.Attempt), so an operation that runs again (after a rollback,
// or a [server.Leased] takeover) derives the same key for the same
// message, and the downstream sees one operation. The version prefix
// changes if the derivation ever does.
func DeriveKey(op server.Operation, name string) string {
	b := make([]byte, 0, 128)
	for _, f := range []string{"idem-outbox-v1", op.Tenant, op.Principal, op.Route, op.Key, name} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	sum := sha256.Sum256(b)
	return keyPrefix + hex.EncodeToString(sum[:])
}

// keyFor returns m.Key, or the key derived from ctx's operation, or a new
// random key.
func keyFor(ctx context.Context, m *Message) string {
	if m.Key != "" {
		return m.Key
	}
	if op, ok := server.OperationFrom(ctx); ok {
		return DeriveKey(op, m.Name)
	}
	return uuid.NewString()
}

// prepare validates m and returns the copy that is stored, with its key.
// keyHeader is the dispatcher's key header: the message may not set it.
func prepare(ctx context.Context, m Message, keyHeader string) (Message, error) {
	if err := m.validate(); err != nil {
		return Message{}, err
	}
	c := m.clone() // canonical header names: a map literal's "x-request-key" is caught too
	if _, set := c.Header[keyHeader]; set {
		return Message{}, fmt.Errorf("%w: header %s is set by the dispatcher, not by the message (use Message.Key)", ErrInvalidMessage, keyHeader)
	}
	c.Key = keyFor(ctx, &m)
	return c, nil
}
