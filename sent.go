package idem

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// wireTrace follows the connections of one attempt through the request's
// httptrace.ClientTrace. GotConn fires once per connection, including the
// new one net/http picks when it re-sends a request by itself after a
// reused connection broke. GetConn fires before net/http asks for each
// connection, so it shows that the base transport saw the trace at all.
// Each attempt gets its own: net/http may still read an attempt's hooks
// from its connection's goroutines after the attempt ended.
type wireTrace struct {
	conns  atomic.Int32
	asked  atomic.Bool // GetConn fired (hooked only when the base is not an *http.Transport)
	hooks  httptrace.ClientTrace
	traced bool // the base is known to see the trace: no need to watch for GetConn
}

func newWireTrace(traced bool) *wireTrace {
	w := &wireTrace{traced: traced}
	w.hooks.GotConn = func(httptrace.GotConnInfo) { w.conns.Add(1) }
	if !traced {
		w.hooks.GetConn = func(string) { w.asked.Store(true) }
	}
	return w
}

// unanswered returns the certainty of an attempt of req that ended with the
// transport error err after conns connections:
//
//   - a connection was obtained: the request may have been written
//     (Ambiguous);
//   - none, and the base transport saw the trace (it is net/http's, or it
//     asked for a connection): nothing was written (NotSent);
//   - none seen, because the base hid the trace (it ran the request under a
//     context of its own): NotSent only when err is recognisably a failure
//     before sending and net/http could not have re-sent req by itself after
//     an earlier send; otherwise Ambiguous.
func (w *wireTrace) unanswered(req *http.Request, err error, conns int) Certainty {
	switch {
	case conns > 0:
		return Ambiguous
	case w.traced || w.asked.Load():
		return NotSent
	case failedBeforeSending(err) && !transportReplays(req):
		return NotSent
	}
	return Ambiguous
}

// failedBeforeSending reports whether err is, by its type, a failure to
// reach the server before any byte of a request could be written: a dial
// (refused, unreachable, DNS), a proxy's CONNECT, or a TLS handshake that
// rejected the server's certificate or met a peer that does not speak TLS.
// The outermost *net.OpError names the operation that failed: a read or a
// write is not before sending, whatever it wraps.
func failedBeforeSending(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) {
		// net/http reports every failure to set up a proxy's connection,
		// its CONNECT included, under Op "proxyconnect".
		return op.Op == "dial" || op.Op == "proxyconnect"
	}
	var (
		dns       *net.DNSError
		verify    *tls.CertificateVerificationError
		header    tls.RecordHeaderError
		authority x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return errors.As(err, &dns) || errors.As(err, &verify) ||
		errors.As(err, &header) && header.Conn != nil || // Conn: no handshake yet
		errors.As(err, &authority) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// transportReplays reports whether net/http's Transport may re-send req by
// itself after a network error on a reused connection, by its documented
// rule: the method is GET, HEAD, OPTIONS or TRACE, or the header has an
// Idempotency-Key or X-Idempotency-Key entry. (The rule's condition on the
// body is left out: counting more requests as replayed only makes more
// errors ambiguous.) For such a request the error of a last dial says
// nothing of the sends before it.
func transportReplays(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, keyed := req.Header[KeyHeader]
	_, xkeyed := req.Header["X-Idempotency-Key"]
	return keyed || xkeyed
}
