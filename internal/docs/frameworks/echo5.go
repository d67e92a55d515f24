package frameworks

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/idemkit/idem/echo5idem"
	"github.com/idemkit/idem/server"
)

// newEcho5API serves POST /v1/accounts/:id/payments on echo v5: one payment
// per key, in the request's transaction.
func newEcho5API(store server.Store) http.Handler {
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			// Your authentication: it puts the caller in echo's context.
			c.Set("tenant", c.Request().Header.Get("X-Tenant"))
			c.Set("user", c.Request().Header.Get("X-User"))
			return next(c)
		}
	})
	pay := echo5idem.Middleware(store, echo5idem.Config{
		Scope: func(c *echo.Context) (string, string) { return c.Get("tenant").(string), c.Get("user").(string) },
	})
	e.POST("/v1/accounts/:id/payments", func(c *echo.Context) error {
		ctx := c.Request().Context()
		tx, _ := server.Tx(ctx) // the claim's transaction
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO payments (account) VALUES ($1) RETURNING id`, c.Param("id")).Scan(&id)
		if err != nil {
			return echo.NewHTTPError(http.StatusServiceUnavailable, "try again") // rendered, rolled back, not stored
		}
		return c.JSON(http.StatusCreated, map[string]int64{"payment_id": id})
	}, pay)
	return e
}
