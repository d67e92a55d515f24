package idem

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/wire"
)

// KeyHeader is the request header that carries the idempotency key.
const KeyHeader = wire.HeaderKey

// NewKey returns a fresh random key: a UUIDv4 in its canonical text form.
func NewKey() string {
	return uuid.NewString()
}

type keyContext struct{}

// keyChoice is what a context says about the key of its requests.
type keyChoice struct {
	key    string
	named  bool // WithKey
	optOut bool // WithoutKey
}

// WithKey returns a context whose requests carry key as their
// Idempotency-Key, whatever their method. Use it when one logical operation
// spans several calls: a key stored before the first call lets a resend after
// a process restart, or an application-level retry, be recognised by the
// server as the same operation. The key must be 1 to 255 printable ASCII
// characters; an invalid key fails the call with ErrKeyInvalid before
// anything is sent.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyContext{}, keyChoice{key: key, named: true})
}

// WithoutKey returns a context whose requests get no generated
// Idempotency-Key. Such a request is retried only when that is safe without
// one: when it was certainly not sent, or when its method is idempotent.
// A key the caller set in the header is kept.
func WithoutKey(ctx context.Context) context.Context {
	return context.WithValue(ctx, keyContext{}, keyChoice{optOut: true})
}

// isIdempotent reports whether RFC 9110 defines method as idempotent.
func isIdempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// requestKey decides the key of a call, in this order: a key the caller set
// in the header, a key named with WithKey, none when opted out or when the
// method is idempotent, else a new one. It returns the bare key and the
// header value to send ("" for none), or why the caller's key is invalid.
func (t *Transport) requestKey(req *http.Request) (key, field string, err error) {
	if fields := req.Header[KeyHeader]; len(fields) > 0 { // KeyHeader is canonical
		if len(fields) > 1 {
			return "", "", fmt.Errorf("the request has %d Idempotency-Key headers, want one", len(fields))
		}
		key, err := wire.ParseKey(fields[0])
		if err != nil {
			return "", "", fmt.Errorf("Idempotency-Key header: %w", err)
		}
		return key, fields[0], nil
	}
	choice, _ := req.Context().Value(keyContext{}).(keyChoice)
	switch {
	case choice.named:
		if err := wire.ValidateKey(choice.key); err != nil {
			return "", "", fmt.Errorf("WithKey: %w", err)
		}
		key = choice.key
	case choice.optOut || isIdempotent(req.Method):
		return "", "", nil
	default:
		key = t.newKey()
	}
	return key, wire.FormatKey(key, t.cfg.SFStringKeys), nil
}
