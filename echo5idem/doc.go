// Package echo5idem is idem's server middleware for echo v5: an
// [echo.MiddlewareFunc] that runs each keyed request to a route at most
// once per key and scope, and answers every retry with the stored
// response, with every rule of [server.Middleware] (docs/CONTRACT.md). It
// is a module of its own (github.com/idemkit/idem/echo5idem), so that an
// app on another framework downloads nothing of echo; echo v4 has its own,
// echoidem.
//
// Mount it on a route, or on a group with Use:
//
//	pay := echo5idem.Middleware(store, echo5idem.Config{Scope: scope})
//	e.POST("/v1/accounts/:id/payments", createPayment, pay)
//
// The route is the method and echo's pattern ([echo.Context.Path]), and
// Scope reads the caller from echo's context. The handler finds
// [server.Tx] and [server.LeaseFrom] in c.Request().Context(). The handler
// writes to a fresh [echo.Response] over idem's capture, by any of echo's
// ways (c.JSON, c.NoContent, Flush, Hijack), with net/http's streaming
// rules; an error it returns is rendered by the app's HTTPErrorHandler
// inside the capture, so that what is stored is what the client got and a
// failure is never stored as a success. The error is then returned up the
// chain as echo's own middlewares do, so the HTTPErrorHandler must, as
// echo's default does, leave a committed response alone
// ([echo.UnwrapResponse]). A replay or a refusal runs nothing after the
// middleware.
package echo5idem
