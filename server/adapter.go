package server

import (
	"net/http"
)

// Exchange is one request as a framework's middleware hands it to
// [Adapter.Serve]: the framework names the route and the scope from its
// own context, and runs the rest of its own chain. An adapter usually
// makes one per request, so that it can also be the framework's view of
// the response writer.
type Exchange interface {
	// Route names the operation, as [Config.Route] does: the method and
	// the pattern that the framework's router matched ("POST
	// /v1/accounts/:id"). "" lets the request bypass idem. Serve calls it
	// at most once, and only for a request whose method is not safe.
	Route() string
	// Scope gives the tenant and principal the request is made for, as
	// [Config.Scope] does, from what the framework's authentication put
	// in its context. Serve calls it at most once, and only for a keyed
	// request.
	Scope() (tenant, principal string)
	// Next runs the rest of the framework's chain: the handler must read
	// r (whose context carries [Tx] and [LeaseFrom] when the request
	// claimed its key) and write to w, which is the capture of the
	// response when the request claimed its key and the writer given to
	// Serve otherwise. A returned error must be rendered to w inside
	// Next, by the framework's own error handler, so that what is stored
	// is what the client gets.
	Next(w http.ResponseWriter, r *http.Request)
}

// Adapter is [Middleware] for the middleware of another framework
// (ginidem, echoidem, echo5idem): one call per request, [Adapter.Serve],
// in place of an http.Handler to wrap. It keeps every rule of the
// middleware (docs/CONTRACT.md), with the route and the scope taken from
// the [Exchange] instead of [Config.Route] and [Config.Scope]. A
// framework that is not built on net/http (fasthttp) converts its request
// to an *http.Request and gives a writer over its own response, as its
// net/http adaptor does, and needs nothing more. An Adapter is safe for
// concurrent use.
type Adapter struct{ h *handler }

// NewAdapter returns an Adapter over store (nil: a new [MemoryStore]) with
// cfg, whose Route and Scope must be nil: the [Exchange] gives them.
// NewAdapter panics on such a Config, and wherever [Middleware] panics.
func NewAdapter(store Store, cfg Config) *Adapter {
	if cfg.Route != nil || cfg.Scope != nil {
		panic("server: NewAdapter's Config.Route and Config.Scope must be nil: the Exchange gives the route and the scope")
	}
	return &Adapter{h: newHandler(store, cfg, nil)}
}

// Serve runs one request as the middleware does, calling ex.Next (ex
// must not be nil) for the rest of the chain. It reports whether it answered the request itself,
// without calling ex.Next (a replay, or a refusal: key missing, invalid,
// reused or in flight, a body too large, the store unavailable): the
// framework's middleware must then abort the rest of its chain. The
// request's context governs the claim, as with [Middleware].
func (a *Adapter) Serve(w http.ResponseWriter, r *http.Request, ex Exchange) (answered bool) {
	return a.h.serve(w, r, ex)
}
