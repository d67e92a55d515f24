package echoidem

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idem/server"
)

// Config configures [Middleware]: the server's [server.Config], whose
// Route and Scope must be nil ([Middleware] panics otherwise), and a
// Scope over echo's context.
type Config struct {
	server.Config

	// Scope gives the tenant and principal a request is made for, from
	// what the application's authentication put in echo's context
	// (c.Get("tenant")), never from the body or the key. Nil: every
	// request shares the scope ("", ""), right only for single-caller
	// services.
	Scope func(c echo.Context) (tenant, principal string)
}

// Middleware returns the middleware over store (nil: a new
// [server.MemoryStore]). The route of a request is its method and the
// pattern echo matched, "POST /v1/accounts/:id/payments"; a request with
// no pattern bypasses idem. It panics where [server.Middleware] does, and
// on a cfg.Config with a Route or a Scope. It is safe for concurrent use.
func Middleware(store server.Store, cfg Config) echo.MiddlewareFunc {
	a := server.NewAdapter(store, cfg.Config)
	scope := cfg.Scope
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			e := &exchange{c: c, next: next, scope: scope}
			if a.Serve(c.Response(), c.Request(), e) {
				return nil // answered: a replay or a refusal
			}
			return e.err
		}
	}
}

// exchange is one request as [server.Adapter.Serve] sees it, with the
// echo Response over the capture in the same allocation.
type exchange struct {
	c     echo.Context
	next  echo.HandlerFunc
	scope func(echo.Context) (string, string)
	resp  echo.Response
	err   error // the chain's
}

func (e *exchange) Route() string {
	if p := e.c.Path(); p != "" {
		return e.c.Request().Method + " " + p
	}
	return ""
}

func (e *exchange) Scope() (tenant, principal string) {
	if e.scope == nil {
		return "", ""
	}
	return e.scope(e.c)
}

// Next runs the rest of echo's chain on r. When the request claimed its
// key, w is the capture: the chain writes to a Response over it, and the
// error it returns is rendered into it by echo's HTTPErrorHandler.
func (e *exchange) Next(w http.ResponseWriter, r *http.Request) {
	c := e.c
	orig, req := c.Response(), c.Request()
	defer func() { c.SetResponse(orig); c.SetRequest(req) }()
	c.SetRequest(r)
	if w == http.ResponseWriter(orig) {
		e.err = e.next(c) // not claimed: echo renders the error as usual
		return
	}
	e.resp = *echo.NewResponse(w, c.Echo())
	c.SetResponse(&e.resp)
	if e.err = e.next(c); e.err != nil {
		c.Error(e.err)
	}
}
