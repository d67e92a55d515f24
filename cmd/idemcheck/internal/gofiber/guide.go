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
		// fiber's pattern: one middleware per route.
		Route: func(*http.Request) string { return "POST /v1/accounts/:id/payments" },
		// From the *http.Request: fiber's Locals are not in it.
		Scope: tenantAndUser,
	})
	app.Post("/v1/accounts/:id/payments", adaptor.HTTPHandler(pay(createPayment)))
}
