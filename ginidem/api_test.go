package ginidem_test

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idem/ginidem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/server"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	adaptertest.Main(m, sampleAPI)
}

// sampleAPI is adaptertest's API on gin, written as a gin app would be:
// authentication puts the caller in gin's context, an error middleware
// renders c.Errors, and idem is mounted on the payment route.
func sampleAPI(app *adaptertest.App, store server.Store, cfg server.Config) http.Handler {
	r := gin.New()
	r.Use(gin.Recovery(), authenticate)
	pay := ginidem.Middleware(store, ginidem.Config{Config: cfg, Scope: func(c *gin.Context) (string, string) {
		return c.GetString("tenant"), c.GetString("principal")
	}})
	r.POST("/v1/accounts/:id/payments", pay, renderErrors, func(c *gin.Context) {
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			_ = c.AbortWithError(http.StatusBadRequest, err)
			return
		}
		p, err := app.Pay(c.Request.Context(), c.Param("id"), body)
		switch {
		case errors.Is(err, adaptertest.ErrInvalid):
			_ = c.AbortWithError(http.StatusUnprocessableEntity, err)
		case err != nil:
			_ = c.AbortWithError(http.StatusServiceUnavailable, err)
		default:
			c.JSON(http.StatusCreated, p)
		}
	})
	r.GET("/v1/accounts/:id", func(c *gin.Context) {
		n, err := app.Count(c.Request.Context(), c.Param("id"))
		if err != nil {
			_ = c.AbortWithError(http.StatusInternalServerError, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"payment_count": n})
	})
	r.GET("/v1/payments/:id", func(c *gin.Context) {
		ok, err := app.Exists(c.Request.Context(), c.Param("id"))
		switch {
		case err != nil:
			_ = c.AbortWithError(http.StatusInternalServerError, err)
		case !ok:
			c.AbortWithStatus(http.StatusNotFound)
		default:
			c.Status(http.StatusOK)
		}
	})
	return r
}

// authenticate puts the caller in gin's context, or answers 401.
func authenticate(c *gin.Context) {
	tenant, principal, ok := adaptertest.Auth(c.GetHeader("Authorization"))
	if !ok {
		c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "unauthenticated"})
		return
	}
	c.Set("tenant", tenant)
	c.Set("principal", principal)
}

// renderErrors renders the chain's last error as JSON, after the status
// the handler chose.
func renderErrors(c *gin.Context) {
	c.Next()
	if err := c.Errors.Last(); err != nil {
		c.JSON(-1, gin.H{"error": err.Error()})
	}
}

func TestConformance(t *testing.T) { adaptertest.Conformance(t, sampleAPI) }

func TestErrorNotStored(t *testing.T) {
	adaptertest.ErrorNotStored(t, sampleAPI, "the database is down")
}

func TestDuplicates(t *testing.T) { adaptertest.Duplicates(t, sampleAPI, 8) }

func TestCrash(t *testing.T) { adaptertest.Crash(t, sampleAPI) }
