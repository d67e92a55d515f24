package echo5idem_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/echo5idem"
	"github.com/idemkit/idem/server"
)

// reply is one response as a test reads it.
type reply struct {
	status   int
	body     string
	replayed bool
}

// chain is an echo app with echo5idem on POST /op in mode, then a
// middleware that counts the requests that reach it, then handler.
type chain struct {
	url     string
	reached int
}

func newChain(t *testing.T, mode server.Mode, handler echo.HandlerFunc) *chain {
	t.Helper()
	ch := &chain{}
	e := echo.New()
	count := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error { ch.reached++; return next(c) }
	}
	e.POST("/op", handler, echo5idem.Middleware(nil, echo5idem.Config{Config: server.Config{Mode: mode}}), count)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	ch.url = srv.URL
	return ch
}

func (ch *chain) post(t *testing.T, key string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ch.url+"/op", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, body: string(b), replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
}

// failOnce fails with fail on its first call and answers 201 "made" after.
func failOnce(fail echo.HandlerFunc) echo.HandlerFunc {
	calls := 0
	return func(c *echo.Context) error {
		calls++
		if calls == 1 {
			return fail(c)
		}
		return c.String(http.StatusCreated, "made")
	}
}

// TestFailuresAreNotStored: an error the handler returns is rendered by
// echo's error handler inside the capture, so the client gets it, it is
// not stored, and the retry runs the handler (issue 42: with
// echo.WrapMiddleware the client got 200 with an empty body, stored).
func TestFailuresAreNotStored(t *testing.T) {
	for name, tc := range map[string]struct {
		fail echo.HandlerFunc
		want reply
	}{
		"HTTPError": {func(*echo.Context) error { return echo.NewHTTPError(http.StatusServiceUnavailable, "db down") },
			reply{status: http.StatusServiceUnavailable, body: `{"message":"db down"}` + "\n"}},
		"plain error": {func(*echo.Context) error { return errors.New("db down") },
			reply{status: http.StatusInternalServerError, body: `{"message":"Internal Server Error"}` + "\n"}},
		"NoContent": {func(c *echo.Context) error { return c.NoContent(http.StatusBadGateway) },
			reply{status: http.StatusBadGateway}},
	} {
		t.Run(name, func(t *testing.T) {
			ch := newChain(t, server.Transactional, failOnce(tc.fail))
			assert.Equal(t, tc.want, ch.post(t, "k"), "the failure as echo renders it")
			assert.Equal(t, reply{status: http.StatusCreated, body: "made"}, ch.post(t, "k"), "the retry ran the handler")
			assert.Equal(t, reply{status: http.StatusCreated, body: "made", replayed: true}, ch.post(t, "k"), "the success is stored")
		})
	}
}

// TestReplayAbortsTheChain: a replay or a refusal runs nothing after the
// middleware.
func TestReplayAbortsTheChain(t *testing.T) {
	ch := newChain(t, server.Transactional, func(c *echo.Context) error { return c.String(http.StatusCreated, "made") })
	ch.post(t, "k")
	assert.True(t, ch.post(t, "k").replayed)
	assert.Equal(t, http.StatusBadRequest, ch.post(t, "").status, "key-missing")
	assert.Equal(t, 1, ch.reached, "requests that reached the rest of the chain")
}

// TestStreamingSettlesEarly: a handler that flushes or hijacks streams,
// and its result cannot be replayed: a retry gets 500
// result-unavailable and the handler never runs again.
func TestStreamingSettlesEarly(t *testing.T) {
	for name, h := range map[string]echo.HandlerFunc{
		"Flush": func(c *echo.Context) error {
			c.Response().WriteHeader(http.StatusCreated)
			_, _ = c.Response().Write([]byte("part1 "))
			_ = http.NewResponseController(c.Response()).Flush()
			_, err := c.Response().Write([]byte("part2"))
			return err
		},
		"Hijack": func(c *echo.Context) error {
			conn, rw, err := http.NewResponseController(c.Response()).Hijack()
			if err != nil {
				return err
			}
			defer conn.Close()
			_, _ = rw.WriteString("HTTP/1.1 201 Created\r\nContent-Length: 11\r\nConnection: close\r\n\r\npart1 part2")
			return rw.Flush()
		},
	} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			ch := newChain(t, server.Transactional, func(c *echo.Context) error { calls++; return h(c) })
			got := ch.post(t, "k")
			assert.Equal(t, reply{status: http.StatusCreated, body: "part1 part2"}, got)
			got = ch.post(t, "k")
			assert.Equal(t, http.StatusInternalServerError, got.status)
			assert.Contains(t, got.body, "result-unavailable")
			assert.Equal(t, 1, calls, "the handler ran once")
		})
	}
}

// TestLeaseInRequestContext: a Leased handler finds its lease in
// c.Request().Context().
func TestLeaseInRequestContext(t *testing.T) {
	ch := newChain(t, server.Leased, func(c *echo.Context) error {
		_, ok := server.LeaseFrom(c.Request().Context())
		return c.String(http.StatusCreated, map[bool]string{true: "leased", false: "none"}[ok])
	})
	assert.Equal(t, "leased", ch.post(t, "k").body)
}
