// Package ginidem is idem's server middleware for gin: a
// [gin.HandlerFunc] that runs each keyed request to a route at most once
// per key and scope, and answers every retry with the stored response,
// with every rule of [server.Middleware] (docs/CONTRACT.md). It is a
// module of its own (github.com/idemkit/idem/ginidem), so that an app on
// another framework downloads nothing of gin.
//
// Mount it on a route, or on a group with Use:
//
//	pay := ginidem.Middleware(store, ginidem.Config{Scope: scope})
//	r.POST("/v1/accounts/:id/payments", pay, createPayment)
//
// The route is the method and gin's pattern ([gin.Context.FullPath]), and
// Scope reads the caller from gin's context. The handler finds
// [server.Tx] and [server.LeaseFrom] in c.Request.Context(). What the
// handler writes, by any of gin's ways (c.JSON, c.Status,
// c.AbortWithStatus, WriteHeaderNow, Flush, Hijack), is captured until its
// outcome is durable, with net/http's streaming rules; a handler that
// records an error (c.Error) and writes nothing gets its status, or 500,
// inside the capture, so a failure is never stored as a success. Mount an
// error-rendering middleware after ginidem, so that what it renders is
// what is stored. A replay or a refusal aborts the rest of the chain.
package ginidem
