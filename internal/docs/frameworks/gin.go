package frameworks

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/ginidem"
	"github.com/idemkit/idem/server"
)

// newGinAPI serves POST /v1/accounts/:id/payments on gin: one payment per
// key, in the request's transaction.
func newGinAPI(store server.Store) http.Handler {
	r := gin.New()
	r.Use(gin.Recovery(), func(c *gin.Context) {
		// Your authentication: it puts the caller in gin's context.
		c.Set("tenant", c.GetHeader("X-Tenant"))
		c.Set("user", c.GetHeader("X-User"))
	})
	pay := ginidem.Middleware(store, ginidem.Config{
		Scope: func(c *gin.Context) (string, string) { return c.GetString("tenant"), c.GetString("user") },
	})
	r.POST("/v1/accounts/:id/payments", pay, func(c *gin.Context) {
		ctx := c.Request.Context()
		tx, _ := server.Tx(ctx) // the claim's transaction
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO payments (account) VALUES ($1) RETURNING id`, c.Param("id")).Scan(&id)
		if err != nil {
			_ = c.AbortWithError(http.StatusServiceUnavailable, err) // rolled back, not stored
			return
		}
		c.JSON(http.StatusCreated, gin.H{"payment_id": id})
	})
	return r
}
