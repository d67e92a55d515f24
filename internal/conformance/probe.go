package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// errBodyTooLarge: a response body longer than MaxBodyBytes.
var errBodyTooLarge = errors.New("the body is over 1 MiB, the checker's limit")

// runner holds what the checks of one run share. It is safe for
// concurrent use.
type runner struct {
	cfg     Config
	client  *http.Client
	intents atomic.Int64
	newUUID func() string
	now     func() time.Time // when a response carries no Date
}

// newRunner resolves cfg's defaults and builds the HTTP client.
func newRunner(cfg Config) *runner {
	return &runner{
		cfg:     cfg.withDefaults(),
		client:  &http.Client{Transport: newTransport(), CheckRedirect: noRedirects},
		newUUID: uuid.NewString,
		now:     time.Now,
	}
}

// newTransport returns a transport of the checker's own, with the
// settings of http.DefaultTransport (which a program may have replaced)
// and room for MaxConcurrency idle connections to the endpoint.
func newTransport() *http.Transport {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    MaxConcurrency,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxHeaderBytes,
	}
}

// noRedirects is the clients' CheckRedirect: a redirect is returned, not
// followed, since it could lead to a host nobody named.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// close releases the client's idle connections.
func (r *runner) close() { r.client.CloseIdleConnections() }

// intent returns the body of a new operation.
func (r *runner) intent() []byte {
	return r.cfg.Body.Render(int(r.intents.Add(1)), r.newUUID())
}

// newKey returns a fresh key in the configured format.
func (r *runner) newKey() string {
	if r.cfg.KeyFormat == KeyPrefixed {
		return "idemcheck-" + r.newUUID()
	}
	return r.newUUID()
}

// call is one request a check sends.
type call struct {
	note   string
	key    string // "" sends no key header
	body   []byte
	second bool // as the second principal
}

// exchange is a request and what came back: at most MaxHeaderBytes of
// header and MaxBodyBytes of body, MaxConcurrency exchanges at once.
type exchange struct {
	call     call
	status   int
	replayed string // the value of Config.ReplayedHeader, "" when absent
	date     string // the response's Date, which header leaves out
	header   http.Header
	body     []byte
	err      error
}

// send makes c's request to the endpoint, bounded by RequestTimeout.
func (r *runner) send(ctx context.Context, c call) exchange {
	x := r.roundTrip(ctx, r.cfg.Method, r.cfg.URL, c)
	x.call = c
	return x
}

// get sends a GET as the first principal, bounded by RequestTimeout.
func (r *runner) get(ctx context.Context, url string) exchange {
	return r.roundTrip(ctx, http.MethodGet, url, call{})
}

// roundTrip sends one request with the principal's headers and c's key,
// and reads the response (at most MaxBodyBytes).
func (r *runner) roundTrip(ctx context.Context, method, url string, c call) exchange {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(c.body))
	if err != nil {
		return exchange{err: err}
	}
	req.Header = r.headers(c.second)
	if c.key != "" {
		req.Header.Set(r.cfg.KeyHeader, c.key)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return exchange{err: err}
	}
	defer resp.Body.Close()
	return r.read(resp)
}

// read reads resp into an exchange: its status, its replay mark, and its
// body, at most MaxBodyBytes (a longer one is an error). The caller
// closes the body.
func (r *runner) read(resp *http.Response) exchange {
	x := exchange{status: resp.StatusCode, header: shownHeader(resp.Header), date: resp.Header.Get("Date")}
	if r.cfg.ReplayedHeader != "" {
		x.replayed = resp.Header.Get(r.cfg.ReplayedHeader)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	switch {
	case err != nil:
		x.err = fmt.Errorf("reading the %d response: %w", resp.StatusCode, err)
	case len(body) > MaxBodyBytes:
		body, x.err = body[:MaxBodyBytes], errBodyTooLarge
	}
	x.body = body
	return x
}

// headers returns the headers of the first principal, or of the second.
func (r *runner) headers(second bool) http.Header {
	h := r.cfg.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if second {
		for name, values := range r.cfg.Principal2 {
			h.Del(name)
			for _, v := range values {
				h.Add(name, v)
			}
		}
	}
	return h
}

// ok2xx reports whether a complete 2xx response arrived.
func (x exchange) ok2xx() bool { return x.err == nil && x.status >= 200 && x.status < 300 }

// refused reports whether a complete 4xx response arrived.
func (x exchange) refused() bool { return x.err == nil && x.status >= 400 && x.status < 500 }

// sameAs reports whether x repeats y's response: same status, same body.
func (x exchange) sameAs(y exchange) bool {
	return x.err == nil && y.err == nil && x.status == y.status && bytes.Equal(x.body, y.body)
}

// marked reports whether x says it is a replay: the replay header is
// present, and neither "false" nor "0".
func (r *runner) marked(x exchange) bool {
	v := strings.TrimSpace(x.replayed)
	return v != "" && !strings.EqualFold(v, "false") && v != "0"
}

// outcome says in a few words what came back.
func (x exchange) outcome() string {
	if x.err != nil && x.status == 0 {
		return "no response (" + x.err.Error() + ")"
	}
	if x.err != nil {
		return fmt.Sprintf("%d, cut short (%v)", x.status, x.err)
	}
	return fmt.Sprintf("%d", x.status)
}

// evidence renders x for a Result.
func (r *runner) evidence(x exchange) Evidence {
	req := &RequestInfo{Method: r.cfg.Method, URL: r.cfg.URL, Principal: "first",
		Key: x.call.key, Keyless: x.call.key == "", Body: clip(x.call.body)}
	if x.call.second {
		req.Principal = "second"
	}
	resp := &ResponseInfo{Status: x.status, Replayed: x.replayed, Header: x.header, Body: clip(x.body)}
	if x.err != nil {
		resp.Error = x.err.Error()
	}
	return Evidence{Note: x.call.note, Request: req, Response: resp}
}

// evidenceOf renders several exchanges.
func (r *runner) evidenceOf(xs ...exchange) []Evidence {
	out := make([]Evidence, len(xs))
	for i, x := range xs {
		out[i] = r.evidence(x)
	}
	return out
}

// clipAt bounds the bodies shown in evidence.
const clipAt = 512

// clip returns b as text, cut at clipAt bytes (on a rune boundary).
func clip(b []byte) string {
	if len(b) <= clipAt {
		return string(b)
	}
	cut := clipAt
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + fmt.Sprintf("... (%d bytes)", len(b))
}
