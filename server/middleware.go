package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/wire"
)

// Middleware returns a middleware that runs each keyed request to a route
// at most once per key and scope, and answers every retry with the stored
// response (docs/CONTRACT.md). store nil means a new [MemoryStore]. Mount it per
// handler, so that r.Pattern names the route:
//
//	payments := server.Middleware(store, server.Config{Scope: scope})
//	mux.Handle("POST /v1/payments", payments(createPayment))
//
// Routes that need another policy or mode get a middleware of their own
// over the same store. The middleware is safe for concurrent use; the
// request's context governs the claim, and the commit of a handler that
// finished runs even if the client has gone. Middleware panics on a
// [Config] it cannot honour (in [Leased] mode, a [Config.Retention] shorter
// than twice [Config.Lease]), and with the error of store's
// [Store.CheckMode] for a [Mode] the store cannot serve (a Redis store
// refuses [Transactional] routes).
func Middleware(store Store, cfg Config) func(http.Handler) http.Handler {
	h := newHandler(store, cfg, nil)
	return func(next http.Handler) http.Handler {
		return &handler{store: h.store, s: h.s, next: next}
	}
}

// newHandler resolves cfg and checks that store can serve its mode.
func newHandler(store Store, cfg Config, next http.Handler) *handler {
	if store == nil {
		store = NewMemoryStore()
	}
	s := newSettings(cfg)
	if err := store.CheckMode(s.Mode); err != nil {
		panic(fmt.Errorf("server: the store cannot serve this route's Config.Mode: %w", err))
	}
	return &handler{store: store, s: s, next: next}
}

// handler is the middleware over next, or, for an [Adapter], over the
// [Exchange] of each request (next is then nil).
type handler struct {
	store Store
	s     *settings
	next  http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.serve(w, r, nil) }

// serve runs one request; ex is nil for the net/http middleware. It
// reports whether it answered without running the rest of the chain.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, ex Exchange) (answered bool) {
	c, answered := h.admit(w, r, ex)
	if answered {
		return true
	}
	if c == nil {
		h.callNext(w, r, ex)
		return false
	}
	start := time.Now()
	res, err := h.store.Claim(r.Context(), c)
	ev := c.event()
	ev.Elapsed, ev.Waited, ev.RouteIsPath = time.Since(start), res.Waited, h.routeIsPath(r, ex)
	switch {
	case errors.Is(err, ErrUnstorableScope):
		ev.Err = err
		h.refuse(w, r, ex, ev, scopeUnstorable(err))
	case err != nil:
		ev.Err = err
		h.refuse(w, r, ex, ev, storeUnavailable())
	case res.Verdict == VerdictClaimed:
		h.run(w, r, ev, c, res.Attempt, ex, expiresOf(res, start, c))
		return false
	case res.Verdict == VerdictReplay:
		h.replayAuthorized(w, r, ex, ev, res)
	case res.Verdict == VerdictInFlight:
		h.refuse(w, r, ex, ev, keyInFlight(res.RetryAfter))
	case res.Verdict == VerdictMismatch:
		h.refuse(w, r, ex, ev, keyReused())
	case res.Verdict == VerdictUnavailable:
		h.refuse(w, r, ex, ev, resultUnavailable())
	case res.Verdict == VerdictUncertain:
		h.refuse(w, r, ex, ev, outcomeUncertain())
	default:
		panic(fmt.Sprintf("server: a store answered a claim with verdict %d", res.Verdict))
	}
	return true
}

// callNext runs the rest of the chain: ex's, or next.
func (h *handler) callNext(w http.ResponseWriter, r *http.Request, ex Exchange) {
	if ex != nil {
		ex.Next(w, r)
		return
	}
	h.next.ServeHTTP(w, r)
}

// routeIsPath reports whether the request's route is its method and raw
// path ([Event.RouteIsPath]); an [Exchange]'s route never is.
func (h *handler) routeIsPath(r *http.Request, ex Exchange) bool {
	return ex == nil && h.s.routeIsPath(r)
}

// routeOf names the operation r is for; "" means bypass.
func (h *handler) routeOf(r *http.Request, ex Exchange) string {
	if ex != nil {
		return ex.Route()
	}
	return h.s.route(r)
}

// scopeOf gives the tenant and principal r is made for.
func (h *handler) scopeOf(r *http.Request, ex Exchange) (tenant, principal string) {
	if ex != nil {
		return ex.Scope()
	}
	return h.s.scope(r)
}

// admit reads the key and the body of r. It returns nil claim args for a
// request that passes straight through, and answered when it has written
// a problem.
func (h *handler) admit(w http.ResponseWriter, r *http.Request, ex Exchange) (c *Claim, answered bool) {
	if safeMethod(r.Method) {
		return nil, false
	}
	route := h.routeOf(r, ex)
	if route == "" {
		return nil, false
	}
	fields := r.Header[h.s.keyHeader] // canonical
	if len(fields) == 0 && (h.s.Keys == KeyOptional || r.Method == http.MethodPut || r.Method == http.MethodDelete) {
		return nil, false // passes through: no need of its scope
	}
	tenant, principal := h.scopeOf(r, ex)
	ev := Event{Tenant: tenant, Principal: principal, Route: route, RouteIsPath: h.routeIsPath(r, ex), Mode: h.s.Mode}
	switch {
	case grpcProtocol(r):
		h.refuse(w, r, ex, ev, protocolUnsupported())
		return nil, true
	case len(fields) == 0:
		h.refuse(w, r, ex, ev, keyMissing(route))
		return nil, true
	case len(fields) > 1:
		h.refuse(w, r, ex, ev, keyInvalid("the request has more than one "+h.s.keyHeader+" field"))
		return nil, true
	}
	key, err := wire.ParseKey(fields[0])
	if err != nil {
		h.refuse(w, r, ex, ev, keyInvalid(h.s.keyHeader+": "+err.Error()))
		return nil, true
	}
	ev.Key = key
	if h.s.expired(r) {
		h.refuse(w, r, ex, ev, deadlineExpired(h.s.deadlineHeader))
		return nil, true
	}
	body, p := readBody(r, h.s.MaxRequestBytes)
	if p != nil {
		h.refuse(w, r, ex, ev, *p)
		return nil, true
	}
	return h.claim(r, ev, body, ex != nil), false
}

// claim builds the claim of r; routed says that an [Exchange] routed it,
// so that r.Pattern, if any, is not a ServeMux pattern.
func (h *handler) claim(r *http.Request, ev Event, body []byte, routed bool) *Claim {
	tenant, principal, route, key := ev.Tenant, ev.Principal, ev.Route, ev.Key
	input := fingerprint.NewInput
	if routed {
		input = fingerprint.NewRoutedInput
	}
	in := input(r, route, body, h.s.fpHeaders)
	c := &Claim{
		Scope:  fingerprint.Scope(tenant, principal, route, key),
		Tenant: tenant, Principal: principal, Route: route, Key: key,
		Digest: fingerprint.Sum(in), DigestAlg: fingerprint.Alg, in: in, Mode: h.s.Mode,
		Lease: h.s.Lease, Retention: h.s.Retention, Wait: h.s.waitBound(),
	}
	if c.Mode == Leased {
		c.Request = encodeRequest(r, h.s.fpHeaders, body)
	}
	return c
}

func (c *Claim) event() Event {
	return Event{Tenant: c.Tenant, Principal: c.Principal, Route: c.Route, Key: c.Key, Mode: c.Mode}
}

// safeMethod reports the methods that never carry an operation to protect.
func safeMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// readBody reads the whole body, at most limit bytes, and puts it back for
// the handler.
func readBody(r *http.Request, limit int64) ([]byte, *problem) {
	var body []byte
	var err error
	if n := r.ContentLength; n >= 0 && n <= limit {
		// net/http ends the body at its Content-Length: read it into a
		// buffer of its size.
		body = make([]byte, n)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
	}
	switch {
	case int64(len(body)) > limit || err != nil && isMaxBytes(err):
		p := tooLarge(limit)
		return nil, &p
	case err != nil:
		p := unreadable(err)
		return nil, &p
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.ContentLength = int64(len(body))
	return body, nil
}

// isMaxBytes reports an error of http.MaxBytesReader's limit. Apart from
// readBody so that its target escapes to the heap only on an error.
func isMaxBytes(err error) bool {
	var tooBig *http.MaxBytesError
	return errors.As(err, &tooBig)
}

// refuse answers with a problem instead of running the handler.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, ex Exchange, ev Event, p problem) {
	ev.Status, ev.Problem = p.status, p.name
	call(h.s.Hooks.Refused, r.Context(), ev)
	level := slog.LevelInfo
	if p.status >= 500 {
		level = slog.LevelWarn
	}
	h.s.log(r.Context(), level, "idem: refused", ev)
	p.st.ref = refOfEvent(ev)
	h.s.answerRefusal(w, r, ex, p)
}

// replay answers with a stored response, which expires at expires (zero:
// not told).
func (h *handler) replay(w http.ResponseWriter, r *http.Request, ex Exchange, ev Event, res *Response, expires time.Time) {
	ev.Status = res.Status
	call(h.s.Hooks.Replayed, r.Context(), ev)
	h.s.log(r.Context(), slog.LevelDebug, "idem: replayed", ev)
	st := standing{state: wire.StateCompleted, ref: refOfEvent(ev), expires: expires}
	if a, ok := ex.(answerer); ok {
		a.Replay(res, st.outcome())
		return
	}
	header := w.Header()
	for name, values := range res.Header {
		if h.s.allow(name) {
			header[name] = values
		}
	}
	header.Set(wire.HeaderReplayed, "true")
	st.write(header)
	if bodyAllowed(res.Status) {
		header.Set("Content-Length", strconv.Itoa(len(res.Body)))
	}
	w.WriteHeader(res.Status)
	_, _ = w.Write(res.Body)
}

// allow reports whether a response header is stored and replayed.
func (s *settings) allow(name string) bool {
	return s.replay[name] && !s.never[name]
}

// detached is ctx without its cancellation, bounded by finishTimeout: the
// commit or rollback of a finished handler runs even if the client left.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
}
