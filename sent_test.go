package idem

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hidingBase runs each request under a context of its own, as a wrapper
// that does not propagate the request's context would: the transport it
// wraps never sees idem's connection trace.
type hidingBase struct{ inner http.RoundTripper }

func (h hidingBase) RoundTrip(r *http.Request) (*http.Response, error) {
	return h.inner.RoundTrip(r.WithContext(context.Background()))
}

// propagatingBase wraps a transport as otelhttp does: it adds a header and a
// trace of its own, and calls the inner transport with a context derived
// from the request's.
type propagatingBase struct {
	inner http.RoundTripper
	conns atomic.Int32 // connections its own trace saw
}

func (p *propagatingBase) RoundTrip(r *http.Request) (*http.Response, error) {
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { p.conns.Add(1) }}
	out := r.Clone(httptrace.WithClientTrace(r.Context(), trace))
	out.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	return p.inner.RoundTrip(out)
}

// newInner returns a plain transport for a wrapper to wrap.
func newInner(t *testing.T) *http.Transport {
	t.Helper()
	inner := &http.Transport{}
	t.Cleanup(inner.CloseIdleConnections)
	return inner
}

// observe records the attempts tr reports.
func observe(tr *Transport) *[]Attempt {
	var seen []Attempt
	tr.cfg.Observer.OnAttempt = func(at Attempt) { seen = append(seen, at) }
	return &seen
}

func certainties(seen []Attempt) []Certainty {
	var cs []Certainty
	for _, at := range seen {
		cs = append(cs, at.Certainty)
	}
	return cs
}

// Issue 22, D3: behind a Base that hides the connection trace, an unkeyed
// POST that the server ran before it dropped the connection is never
// re-sent: it ends as outcome unknown.
func TestHiddenTraceUnkeyedPOSTNotResent(t *testing.T) {
	for _, drop := range []struct {
		name string
		fn   func(http.ResponseWriter) bool
	}{{"FIN", dropFIN}, {"RST", dropRST}} {
		t.Run(drop.name, func(t *testing.T) {
			a := &api{fault: func(n int, w http.ResponseWriter) bool { return drop.fn(w) }}
			srv := a.start(t)
			tr, clk := newTestTransport(t, Config{Base: hidingBase{newInner(t)}})

			_, err := tr.RoundTrip(post(t, WithoutKey(context.Background()), srv.URL, `{}`))
			require.ErrorIs(t, err, ErrOutcomeUnknown)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, Ambiguous, e.Certainty)
			assert.True(t, e.MayHaveTakenEffect)
			assert.Equal(t, 1, e.Attempts)
			assert.EqualValues(t, 1, a.requests.Load(), "requests reaching the server")
			assert.EqualValues(t, 1, a.effects.Load(), "effects")
			assert.Empty(t, clk.Waits())
		})
	}
}

// Behind the same Base, a keyed POST whose response was dropped is retried
// with the same key, the first attempt counted as ambiguous.
func TestHiddenTraceKeyedPOSTRetriedWithSameKey(t *testing.T) {
	a := &api{keys: make(chan string, 10)}
	a.fault = func(n int, w http.ResponseWriter) bool { return n == 1 && dropFIN(w) }
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{Base: hidingBase{newInner(t)}})
	seen := observe(tr)

	resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.NoError(t, err)
	assert.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	readAll(t, resp)
	assert.Equal(t, []Certainty{Ambiguous, Responded}, certainties(*seen))
	assert.EqualValues(t, 1, a.effects.Load(), "effects")
	k1, k2 := <-a.keys, <-a.keys
	assert.NotEmpty(t, k1)
	assert.Equal(t, k1, k2, "the retry must carry the first attempt's key")
}

// Behind the same Base, a refused dial is recognised by its type: the
// unkeyed POST is retried as not sent.
func TestHiddenTraceDialErrorRetried(t *testing.T) {
	a := &api{}
	srv := a.start(t)
	inner, dials := refusingFirst(t, 1)
	tr, _ := newTestTransport(t, Config{Base: hidingBase{inner}})
	seen := observe(tr)

	resp, err := tr.RoundTrip(post(t, WithoutKey(context.Background()), srv.URL, `{}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	readAll(t, resp)
	assert.Equal(t, []Certainty{NotSent, Responded}, certainties(*seen))
	assert.EqualValues(t, 2, dials.Load(), "dials")
	assert.EqualValues(t, 1, a.requests.Load(), "requests reaching the server")
}

// Behind the same Base, a dial error does not prove that a keyed request was
// not sent: net/http re-sends it by itself after a reused connection broke,
// and returns the error of the re-send's dial. The server ran it, so the
// call must not say that it certainly did not act.
func TestHiddenTraceDialErrorAfterTransportResend(t *testing.T) {
	a := &api{fault: func(n int, w http.ResponseWriter) bool { return n >= 2 && dropFIN(w) }}
	srv := a.start(t)
	inner, dials := refusingAfter(t, 1)
	tr, _ := newTestTransport(t, Config{Base: hidingBase{inner}, MaxAttempts: 2})
	warm, err := tr.RoundTrip(mustGet(t, srv.URL)) // the connection the POST reuses
	require.NoError(t, err)
	readAll(t, warm)
	seen := observe(tr)

	_, err = tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "dial", op.Op, "the error is the re-send's refused dial")
	assert.ErrorIs(t, err, ErrOutcomeUnknown)
	assert.Equal(t, []Certainty{Ambiguous, Ambiguous}, certainties(*seen))
	assert.EqualValues(t, 2, a.effects.Load(), "the warm-up GET and the POST ran")
	assert.EqualValues(t, 3, dials.Load(), "the warm-up's, the re-send's, the retry's")
}

// A Base that propagates the request's context, as otelhttp does, changes
// nothing: net/http's re-sends are counted through the wrapper.
func TestPropagatingBaseResendsCounted(t *testing.T) {
	a := &api{fault: func(n int, w http.ResponseWriter) bool { return n >= 2 && dropFIN(w) }}
	srv := a.start(t)
	base := &propagatingBase{inner: newInner(t)}
	tr, _ := newTestTransport(t, Config{Base: base, MaxAttempts: 2})
	warm, err := tr.RoundTrip(mustGet(t, srv.URL))
	require.NoError(t, err)
	readAll(t, warm)
	seen := observe(tr)

	_, err = tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	require.ErrorIs(t, err, ErrAttemptsExhausted)
	assert.ErrorIs(t, err, ErrOutcomeUnknown)
	require.Len(t, *seen, 1, "one call of the base transport")
	assert.Equal(t, 2, (*seen)[0].Wire, "net/http re-sent it on a new connection")
	assert.Equal(t, Ambiguous, (*seen)[0].Certainty)
	assert.EqualValues(t, 3, base.conns.Load(), "the wrapper's own trace saw every connection")
	assert.EqualValues(t, 3, a.requests.Load(), "the warm-up and two sends")
}

// Behind a Base that propagates the request's context, an unkeyed POST
// dropped after the server ran it is ambiguous and not re-sent, and a dial
// error of any type is not sent: the trace shows that no connection was
// obtained.
func TestPropagatingBaseUnkeyedPOST(t *testing.T) {
	t.Run("dropped", func(t *testing.T) {
		a := &api{fault: func(n int, w http.ResponseWriter) bool { return dropRST(w) }}
		srv := a.start(t)
		tr, _ := newTestTransport(t, Config{Base: &propagatingBase{inner: newInner(t)}})
		_, err := tr.RoundTrip(post(t, WithoutKey(context.Background()), srv.URL, `{}`))
		require.ErrorIs(t, err, ErrOutcomeUnknown)
		assert.EqualValues(t, 1, a.requests.Load(), "requests reaching the server")
	})
	t.Run("untyped dial error", func(t *testing.T) {
		a := &api{}
		srv := a.start(t)
		var dials atomic.Int32
		var d net.Dialer
		inner := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) == 1 {
				return nil, errors.New("dialer: no route today")
			}
			return d.DialContext(ctx, network, addr)
		}}
		t.Cleanup(inner.CloseIdleConnections)
		tr, _ := newTestTransport(t, Config{Base: &propagatingBase{inner: inner}})
		seen := observe(tr)
		resp, err := tr.RoundTrip(post(t, WithoutKey(context.Background()), srv.URL, `{}`))
		require.NoError(t, err)
		readAll(t, resp)
		assert.Equal(t, []Certainty{NotSent, Responded}, certainties(*seen))
		assert.EqualValues(t, 1, a.requests.Load(), "requests reaching the server")
	})
}

// With net/http's Transport as the Base, an error raised before it asked for
// a connection (here an unsupported scheme) is not sent.
func TestTransportBaseRejectsBeforeConnecting(t *testing.T) {
	tr, _ := newTestTransport(t, Config{})
	seen := observe(tr)
	_, err := tr.RoundTrip(post(t, WithoutKey(context.Background()), "ftp://127.0.0.1:1/pay", `{}`))
	require.ErrorIs(t, err, ErrAttemptsExhausted)
	assert.NotErrorIs(t, err, ErrOutcomeUnknown)
	assert.Equal(t, slices.Repeat([]Certainty{NotSent}, DefaultMaxAttempts), certainties(*seen))
}

// failedBeforeSending recognises failures before sending by their types,
// never by their messages.
func TestFailedBeforeSending(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	conn, peer := net.Pipe()
	t.Cleanup(func() { conn.Close(); peer.Close() })
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"dial", refused, true},
		{"dial in url.Error", &url.Error{Op: "Post", URL: "http://x/", Err: refused}, true},
		{"dial wrapped", fmt.Errorf("otel: %w", refused), true},
		{"DNS", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, true},
		{"DNS in dial", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host"}}, true},
		{"proxy CONNECT", &net.OpError{Op: "proxyconnect", Net: "tcp", Err: errors.New("407 Proxy Authentication Required")}, true},
		{"certificate", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, true},
		{"unknown authority", x509.UnknownAuthorityError{}, true},
		{"hostname", x509.HostnameError{Host: "x"}, true},
		{"certificate invalid", x509.CertificateInvalidError{Reason: x509.Expired}, true},
		{"not TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake", Conn: conn}, true},
		{"bad record later", tls.RecordHeaderError{Msg: "oversized record"}, false},
		{"read", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, false},
		{"write", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, false},
		{"remote alert", &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, false},
		{"read around DNS", &net.OpError{Op: "read", Err: &net.DNSError{}}, false},
		{"alert", tls.AlertError(40), false},
		{"EOF", io.EOF, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, false},
		{"deadline", context.DeadlineExceeded, false},
		{"message only", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, failedBeforeSending(tt.err), "failedBeforeSending(%v)", tt.err)
		})
	}
}

// transportReplays follows net/http's documented rule for re-sending a
// request by itself.
func TestTransportReplays(t *testing.T) {
	for _, tt := range []struct {
		method string
		header string
		want   bool
	}{
		{"GET", "", true}, {"HEAD", "", true}, {"OPTIONS", "", true}, {"TRACE", "", true}, {"", "", true},
		{"POST", "", false}, {"PATCH", "", false}, {"PUT", "", false}, {"DELETE", "", false},
		{"POST", KeyHeader, true}, {"POST", "X-Idempotency-Key", true}, {"POST", "X-Request-Id", false},
	} {
		req := &http.Request{Method: tt.method, Header: http.Header{}}
		if tt.header != "" {
			req.Header[tt.header] = []string{"k"}
		}
		assert.Equal(t, tt.want, transportReplays(req), "%q with %q", tt.method, tt.header)
	}
}
