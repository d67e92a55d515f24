package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// proxy forwards requests to its upstreams in turn.
type proxy struct {
	upstreams []*url.URL
	next      atomic.Uint64
	transport *http.Transport
	rp        *httputil.ReverseProxy
}

type upstreamKey struct{}

// newProxy parses the upstream URLs and builds the reverse proxy.
func newProxy(upstreams []string) (*proxy, error) {
	if len(upstreams) == 0 {
		return nil, errors.New("testserver: NewProxy needs at least one upstream URL")
	}
	p := &proxy{transport: newTransport()}
	for _, raw := range upstreams {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("testserver: upstream %q: %w", raw, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("testserver: upstream %q is not an absolute http(s) URL", raw)
		}
		p.upstreams = append(p.upstreams, u)
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pr.In.Context().Value(upstreamKey{}).(*url.URL))
		},
		Transport:    p.transport,
		ErrorHandler: p.fail,
		ErrorLog:     discardLog(),
	}
	return p, nil
}

// newTransport returns the proxy's own transport, with the settings of
// http.DefaultTransport (which a test may have replaced with any
// RoundTripper) but more idle connections per upstream, as a proxy needs.
func newTransport() *http.Transport {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// ServeHTTP forwards r to the next upstream and notes which one in the
// request's event.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u := p.upstreams[(p.next.Add(1)-1)%uint64(len(p.upstreams))]
	if x, ok := r.Context().Value(exchangeKey{}).(*exchange); ok {
		x.ev.Upstream = u.String()
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), upstreamKey{}, u)))
}

// fail answers 502 when the upstream could not be reached or failed
// mid-response, and records why. When no connection to the upstream could
// be opened (a dial error), the request never left the proxy: the event
// says that the handler did not run.
func (p *proxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	if x, ok := r.Context().Value(exchangeKey{}).(*exchange); ok {
		x.ev.Err = "upstream: " + err.Error()
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			x.ev.HandlerRan = false
		}
	}
	http.Error(w, "testserver: upstream failed: "+err.Error(), http.StatusBadGateway)
}

// close releases the proxy's idle upstream connections.
func (p *proxy) close() {
	p.transport.CloseIdleConnections()
}
