package ginidem

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/server"
)

// Config configures [Middleware]: the server's [server.Config], whose
// Route and Scope must be nil ([Middleware] panics otherwise), and a
// Scope over gin's context.
type Config struct {
	server.Config

	// Scope gives the tenant and principal a request is made for, from
	// what the application's authentication put in gin's context
	// (c.GetString("tenant")), never from the body or the key. Nil: every
	// request shares the scope ("", ""), right only for single-caller
	// services.
	Scope func(c *gin.Context) (tenant, principal string)
}

// Middleware returns the middleware over store (nil: a new
// [server.MemoryStore]). The route of a request is its method and the
// pattern gin matched, "POST /v1/accounts/:id/payments"; a request no
// route matched bypasses idem. It panics where [server.Middleware] does,
// and on a cfg.Config with a Route or a Scope. It is safe for concurrent
// use.
func Middleware(store server.Store, cfg Config) gin.HandlerFunc {
	a := server.NewAdapter(store, cfg.Config)
	scope := cfg.Scope
	return func(c *gin.Context) {
		if a.Serve(c.Writer, c.Request, &exchange{c: c, scope: scope}) {
			c.Abort()
		}
	}
}

// exchange is one request as [server.Adapter.Serve] sees it; its writer is
// gin's view of the capture, in the same allocation.
type exchange struct {
	c     *gin.Context
	scope func(*gin.Context) (string, string)
	w     writer
}

func (e *exchange) Route() string {
	if p := e.c.FullPath(); p != "" {
		return e.c.Request.Method + " " + p
	}
	return ""
}

func (e *exchange) Scope() (tenant, principal string) {
	if e.scope == nil {
		return "", ""
	}
	return e.scope(e.c)
}

// Next runs the rest of gin's chain on r. When the request claimed its
// key, w is the capture: the chain writes to it through gin's interface,
// and an error it recorded without writing is rendered into it.
func (e *exchange) Next(w http.ResponseWriter, r *http.Request) {
	c := e.c
	orig, req := c.Writer, c.Request
	defer func() { c.Writer, c.Request = orig, req }()
	c.Request = r
	if w == http.ResponseWriter(orig) {
		c.Next() // not claimed: gin's own writer
		return
	}
	e.w = writer{ResponseWriter: w, orig: orig, status: http.StatusOK, size: unwritten}
	c.Writer = &e.w
	c.Next()
	if !e.w.Written() && len(c.Errors) > 0 && e.w.status < http.StatusBadRequest {
		e.w.status = http.StatusInternalServerError
	}
	e.w.WriteHeaderNow() // as gin does after its chain
}
