package frameworks

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idem/echoidem"
	"github.com/idemkit/idem/server"
)

// newEchoAPI serves POST /v1/accounts/:id/payments on echo v4: one payment
// per key, in the request's transaction.
func newEchoAPI(store server.Store) http.Handler {
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			// Your authentication: it puts the caller in echo's context.
			c.Set("tenant", c.Request().Header.Get("X-Tenant"))
			c.Set("user", c.Request().Header.Get("X-User"))
			return next(c)
		}
	})
	pay := echoidem.Middleware(store, echoidem.Config{
		Scope: func(c echo.Context) (string, string) { return c.Get("tenant").(string), c.Get("user").(string) },
	})
	e.POST("/v1/accounts/:id/payments", func(c echo.Context) error {
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
