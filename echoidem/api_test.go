package echoidem_test

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idem/echoidem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/server"
)

func TestMain(m *testing.M) { adaptertest.Main(m, sampleAPI) }

// sampleAPI is adaptertest's API on echo v4, written as an echo app would
// be: authentication puts the caller in echo's context, handlers return
// errors (echo.NewHTTPError) for echo's HTTPErrorHandler to render, and
// idem is mounted on the payment route.
func sampleAPI(app *adaptertest.App, store server.Store, cfg server.Config) http.Handler {
	e := echo.New()
	e.Use(authenticate)
	pay := echoidem.Middleware(store, echoidem.Config{Config: cfg, Scope: func(c echo.Context) (string, string) {
		return c.Get("tenant").(string), c.Get("principal").(string)
	}})
	e.POST("/v1/accounts/:id/payments", func(c echo.Context) error {
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, err.Error())
		}
		p, err := app.Pay(c.Request().Context(), c.Param("id"), body)
		switch {
		case errors.Is(err, adaptertest.ErrInvalid):
			return echo.NewHTTPError(http.StatusUnprocessableEntity, err.Error())
		case err != nil:
			return echo.NewHTTPError(http.StatusServiceUnavailable, err.Error())
		}
		return c.JSON(http.StatusCreated, p)
	}, pay)
	e.GET("/v1/accounts/:id", func(c echo.Context) error {
		n, err := app.Count(c.Request().Context(), c.Param("id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]int{"payment_count": n})
	})
	e.GET("/v1/payments/:id", func(c echo.Context) error {
		ok, err := app.Exists(c.Request().Context(), c.Param("id"))
		switch {
		case err != nil:
			return err
		case !ok:
			return echo.ErrNotFound
		}
		return c.NoContent(http.StatusOK)
	})
	return e
}

// authenticate puts the caller in echo's context, or answers 401.
func authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		tenant, principal, ok := adaptertest.Auth(c.Request().Header.Get("Authorization"))
		if !ok {
			return echo.ErrUnauthorized
		}
		c.Set("tenant", tenant)
		c.Set("principal", principal)
		return next(c)
	}
}

func TestConformance(t *testing.T) { adaptertest.Conformance(t, sampleAPI) }

func TestErrorNotStored(t *testing.T) {
	adaptertest.ErrorNotStored(t, sampleAPI, "the database is down")
}

func TestDuplicates(t *testing.T) { adaptertest.Duplicates(t, sampleAPI, 8) }

func TestCrash(t *testing.T) { adaptertest.Crash(t, sampleAPI) }
