package outbox

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/idemkit/idem/internal/wire"
)

// The limits of a message, as Message's fields' docs state them:
// maxBodyBytes bounds Message.Body; maxHeaders the values of
// Message.Header, and maxHeaderBytes their names and values added up.
const (
	maxBodyBytes   = 256 << 10
	maxHeaderBytes = 16 << 10
	maxHeaders     = 100
)

// maxNameLen bounds Message.Name, maxURLLen Message.URL.
const (
	maxNameLen = 128
	maxURLLen  = 8 << 10
)

// Errors of [Outbox.Enqueue] and [Outbox.Redrive]. Enqueue wraps
// [ErrInvalidMessage] with the field at fault; nothing is stored when it
// returns an error.
var (
	// ErrNoTx: [Outbox.Enqueue] was given a nil transaction.
	ErrNoTx = errors.New("outbox: nil transaction: a message is enqueued in the caller's transaction")
	// ErrInvalidMessage: a field of the [Message] is invalid (the error
	// names it).
	ErrInvalidMessage = errors.New("outbox: invalid message")
	// ErrKeyConflict: a different message was already enqueued under this
	// Idempotency-Key (two messages of one operation with the same
	// [Message.Name], or one [Message.Key] given to two messages).
	// Enqueueing the same message again under its key is not an error: it
	// returns the first one's ID.
	ErrKeyConflict = errors.New("outbox: a different message is already enqueued under this key")
	// ErrNotParked: [Outbox.Redrive] named a message that is not parked
	// (unknown, pending, being delivered, or delivered).
	ErrNotParked = errors.New("outbox: message is not parked")
	// ErrPastRetention: [Outbox.Redrive] named a parked message whose first
	// delivery that may have taken effect is older than the downstream's
	// key retention ([Config.KeyRetention], see [ParkedMessage.RedriveBy]):
	// the downstream may have acted on it and forgotten its key, so a
	// delivery now could run the operation twice.
	// [Outbox.RedrivePastRetention] sends it anyway.
	ErrPastRetention = errors.New("outbox: the message's first delivery is older than the downstream's key retention")
)

// Message is an HTTP request to another service, sent by the dispatcher
// after the transaction that enqueued it commits, and on every retry with
// the same Idempotency-Key.
type Message struct {
	// Name says what the message is ("payment.created"). It must be 1 to
	// 128 printable ASCII characters, and distinct among the messages of
	// one operation: it is part of the derived key (see Key).
	Name string
	// Method is the HTTP method, an RFC 9110 token ("POST"). Required.
	Method string
	// URL is the absolute http or https URL the request is sent to, at
	// most 8 KiB.
	URL string
	// Header holds the request's headers. Idempotency-Key is not allowed
	// here (the dispatcher sets it from Key), nor are the headers the
	// transport owns: Host, Content-Length, Transfer-Encoding, Connection,
	// Keep-Alive, Upgrade, TE, Trailer, Proxy-Connection. It holds at most
	// 100 values, and 16 KiB in all: the lengths of its names and values
	// added up, a name counted once per value (a name without values
	// counts as one empty value: it is stored with the message, though no
	// request carries it). A request whose headers are larger is one most
	// servers refuse (HTTP/1.1 servers commonly allow 8 to 16 KiB in all),
	// and every byte is stored with the message. Headers and body
	// are stored in the database in clear until the message is deleted:
	// put a credential the downstream needs in the Base of [Config.Client]
	// (a RoundTripper that adds it) rather than in every message.
	Header http.Header
	// Body is the request body, at most 256 KiB. A message is a
	// notification, not a file transfer: a larger payload belongs in
	// storage the receiver can fetch, with its reference in the message.
	Body []byte
	// Key is the Idempotency-Key sent on every delivery attempt. Empty: it is
	// derived at enqueue from the [server.Operation] that ctx carries (see
	// [DeriveKey]), so that the operation, if it runs again, enqueues the same
	// message under the same key; without an operation, a random UUIDv4 fixed
	// at enqueue. A Key given must be 1 to 255 printable ASCII characters.
	Key string
}

// ownedHeaders are the headers a Message may not set: the dispatcher or
// the transport sets them.
var ownedHeaders = map[string]bool{
	"Idempotency-Key": true, "Host": true, "Content-Length": true, "Transfer-Encoding": true,
	"Connection": true, "Keep-Alive": true, "Upgrade": true, "Te": true, "Trailer": true,
	"Proxy-Connection": true,
}

// validate returns what is wrong with m (whose Key may still be empty), as
// an error that wraps ErrInvalidMessage.
func (m *Message) validate() error {
	var problem string
	switch {
	case m.Name == "" || len(m.Name) > maxNameLen || !printable(m.Name):
		problem = fmt.Sprintf("Name must be 1 to %d printable ASCII characters", maxNameLen)
	case !wire.ValidHeaderName(m.Method):
		problem = fmt.Sprintf("Method %q is not an HTTP method (a non-empty token)", m.Method)
	case len(m.Body) > maxBodyBytes:
		problem = fmt.Sprintf("Body is %d bytes, over the limit of %d", len(m.Body), maxBodyBytes)
	default:
		problem = firstOf(validURL(m.URL), validHeader(m.Header), validKey(m.Key))
	}
	if problem == "" {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidMessage, problem)
}

func firstOf(problems ...string) string {
	for _, p := range problems {
		if p != "" {
			return p
		}
	}
	return ""
}

func validURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case len(raw) > maxURLLen:
		return fmt.Sprintf("URL is %d bytes, over the limit of %d", len(raw), maxURLLen)
	case err != nil:
		return fmt.Sprintf("URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("URL %q must be absolute, with scheme http or https", raw)
	case u.Host == "":
		return fmt.Sprintf("URL %q has no host", raw)
	}
	return ""
}

func validHeader(h http.Header) string {
	if p := headerSize(h); p != "" {
		return p
	}
	for name, values := range h {
		switch {
		case !wire.ValidHeaderName(name):
			return fmt.Sprintf("header name %q is not a token", name)
		case ownedHeaders[http.CanonicalHeaderKey(name)]:
			return fmt.Sprintf("header %s is set by the dispatcher or the transport, not by the message (use Message.Key for the Idempotency-Key)", name)
		}
		for _, v := range values {
			if !validHeaderValue(v) {
				return fmt.Sprintf("header %s has a value with a control character", name)
			}
		}
	}
	return ""
}

// headerSize returns what is wrong with the size of h, checked before its
// contents so that a huge header costs one pass over the lengths.
func headerSize(h http.Header) string {
	count, size := 0, 0
	for name, values := range h {
		count += max(len(values), 1)
		size += len(name) * max(len(values), 1)
		for _, v := range values {
			size += len(v)
		}
	}
	switch {
	case count > maxHeaders:
		return fmt.Sprintf("Header has %d values, over the limit of %d", count, maxHeaders)
	case size > maxHeaderBytes:
		return fmt.Sprintf("Header is %d bytes, over the limit of %d", size, maxHeaderBytes)
	}
	return ""
}

func validKey(key string) string {
	if key == "" {
		return ""
	}
	if err := wire.ValidateKey(key); err != nil {
		return "Key: " + err.Error()
	}
	return ""
}

// validHeaderValue reports whether v has no control character but HTAB.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// same reports whether two messages are the same request under one key.
func (m *Message) same(o *Message) bool {
	return m.Name == o.Name && m.Method == o.Method && m.URL == o.URL && m.Key == o.Key &&
		string(m.Body) == string(o.Body) && sameHeader(m.Header, o.Header)
}

func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || len(va) != len(vb) {
			return false
		}
		for i := range va {
			if va[i] != vb[i] {
				return false
			}
		}
	}
	return true
}

// clone returns a deep copy of m, whose Header keys are canonical.
func (m *Message) clone() Message {
	c := *m
	c.Body = append([]byte(nil), m.Body...)
	c.Header = make(http.Header, len(m.Header))
	for k, v := range m.Header {
		ck := http.CanonicalHeaderKey(k)
		c.Header[ck] = append(c.Header[ck], v...)
	}
	if len(m.Body) == 0 {
		c.Body = nil
	}
	return c
}
