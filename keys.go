package idem

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/wire"
)

// KeyHeader is the default name of the request header that carries the
// idempotency key, the one of the IETF draft; [Config.KeyHeader] names
// another for APIs that use their own (X-Idempotency-Key,
// PayPal-Request-Id).
const KeyHeader = "Idempotency-Key"

// NewKey returns a fresh random key: a UUIDv4 in its canonical text form.
func NewKey() string {
	return uuid.NewString()
}

// WithKey returns a context whose requests carry key as their idempotency
// key, whatever their method. Use it when one logical operation spans
// several calls: a key stored before the first call lets a resend after a
// process restart, or an application-level retry, be recognised by the
// server as the same operation. The key must be 1 to 255 printable ASCII
// characters; an invalid key fails the call with [ErrKeyInvalid] before
// anything is sent. It replaces an earlier WithKey or [WithoutKey] of ctx.
func WithKey(ctx context.Context, key string) context.Context {
	return withOption(ctx, func(o *callOptions) { o.key, o.named, o.optOut = key, true, false })
}

// WithoutKey returns a context whose requests get no generated key. Such
// a request is retried only when that is safe without one: when it was
// certainly not sent, or when its method is idempotent. A key the caller
// set in the header is kept. It replaces an earlier [WithKey] of ctx.
func WithoutKey(ctx context.Context) context.Context {
	return withOption(ctx, func(o *callOptions) { o.key, o.named, o.optOut = "", false, true })
}

// requestKey decides the key of a call, in this order: a key the caller set
// in the header, a key named with [WithKey], none when opted out or when the
// method is idempotent, else a new one. It returns the bare key and the
// header value to send ("" for none), or why the caller's key is invalid.
func (t *Transport) requestKey(req *http.Request, choice *callOptions) (key, field string, err error) {
	if fields := req.Header[t.keyHeader]; len(fields) > 0 { // keyHeader is canonical
		if len(fields) > 1 {
			return "", "", fmt.Errorf("the request has %d %s headers, want one", len(fields), t.keyHeader)
		}
		key, err := wire.ParseKey(fields[0])
		if err != nil {
			return "", "", fmt.Errorf("%s header: %w", t.keyHeader, err)
		}
		return key, fields[0], nil
	}
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
