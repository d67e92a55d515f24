package gofiber

import (
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/idemkit/idem/server"
)

// GuideFiber is docs/frameworks.md's fiber block, compiled here (the one
// module of the repository with fiber): a net/http handler behind the
// net/http middleware, mounted on a fiber route with fiber's adaptor.
func GuideFiber(app *fiber.App, store server.Store, tenantAndUser func(*http.Request) (string, string), createPayment http.HandlerFunc) {
	pay := server.Middleware(store, server.Config{
		Route: func(*http.Request) string { return "POST /v1/accounts/:id/payments" }, // fiber's pattern: one middleware per route
		Scope: tenantAndUser, // from the *http.Request: fiber's Locals are not in it
	})
	app.Post("/v1/accounts/:id/payments", adaptor.HTTPHandler(pay(createPayment)))
}
