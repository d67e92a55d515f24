package ginidem_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/ginidem"
	"github.com/idemkit/idem/server"
)

// reply is one response as a test reads it.
type reply struct {
	status   int
	body     string
	replayed bool
	problem  string
}

// chain is a gin app with ginidem on POST /op in mode, then a middleware
// that counts the requests that reach it, then handler.
type chain struct {
	url     string
	reached int
}

func newChain(t *testing.T, mode server.Mode, handler gin.HandlerFunc) *chain {
	t.Helper()
	ch := &chain{}
	r := gin.New()
	r.POST("/op", ginidem.Middleware(nil, ginidem.Config{Config: server.Config{Mode: mode}}),
		func(c *gin.Context) { ch.reached++ }, handler)
	srv := httptest.NewServer(r)
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
	problem := ""
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		problem = string(b)
	}
	return reply{status: resp.StatusCode, body: string(b), replayed: resp.Header.Get("Idempotent-Replayed") == "true", problem: problem}
}

// failOnce answers with fail on its first call and 201 "made" after.
func failOnce(fail gin.HandlerFunc) gin.HandlerFunc {
	calls := 0
	return func(c *gin.Context) {
		calls++
		if calls == 1 {
			fail(c)
			return
		}
		c.String(http.StatusCreated, "made")
	}
}

// TestFailuresAreNotStored: every way gin ends a request with a failure is
// captured, so the failure is not stored and the retry runs the handler.
func TestFailuresAreNotStored(t *testing.T) {
	errDown := errors.New("down")
	for name, fail := range map[string]gin.HandlerFunc{
		"c.Error alone":    func(c *gin.Context) { _ = c.Error(errDown) },
		"status and error": func(c *gin.Context) { c.Status(http.StatusBadGateway); _ = c.Error(errDown) },
		"AbortWithStatus":  func(c *gin.Context) { c.AbortWithStatus(http.StatusServiceUnavailable) },
		"AbortWithError":   func(c *gin.Context) { _ = c.AbortWithError(http.StatusServiceUnavailable, errDown) },
		"WriteHeaderNow":   func(c *gin.Context) { c.Status(http.StatusInternalServerError); c.Writer.WriteHeaderNow() },
		"JSON":             func(c *gin.Context) { c.JSON(http.StatusServiceUnavailable, gin.H{"error": "down"}) },
	} {
		t.Run(name, func(t *testing.T) {
			ch := newChain(t, server.Transactional, failOnce(fail))
			got := ch.post(t, "k")
			assert.GreaterOrEqual(t, got.status, 500, "the failure reached the client")
			assert.False(t, got.replayed)
			got = ch.post(t, "k")
			assert.Equal(t, reply{status: http.StatusCreated, body: "made"}, got, "the retry ran the handler")
			got = ch.post(t, "k")
			assert.Equal(t, reply{status: http.StatusCreated, body: "made", replayed: true}, got, "the success is stored")
		})
	}
}

// TestWritesAreCaptured: a status gin writes only after its chain, and a
// string, are what is stored.
func TestWritesAreCaptured(t *testing.T) {
	for name, tc := range map[string]struct {
		h    gin.HandlerFunc
		want reply
	}{
		"status only": {func(c *gin.Context) { c.Status(http.StatusAccepted) }, reply{status: http.StatusAccepted}},
		"WriteString": {func(c *gin.Context) { c.Status(http.StatusCreated); _, _ = c.Writer.WriteString("made") },
			reply{status: http.StatusCreated, body: "made"}},
		"WriteHeaderNow": {func(c *gin.Context) { c.Status(http.StatusCreated); c.Writer.WriteHeaderNow(); c.Status(http.StatusOK) },
			reply{status: http.StatusCreated}},
	} {
		t.Run(name, func(t *testing.T) {
			ch := newChain(t, server.Transactional, tc.h)
			assert.Equal(t, tc.want, ch.post(t, "k"))
			tc.want.replayed = true
			assert.Equal(t, tc.want, ch.post(t, "k"), "the replay")
		})
	}
}

// TestReplayAbortsTheChain: a replay runs nothing after the middleware.
func TestReplayAbortsTheChain(t *testing.T) {
	ch := newChain(t, server.Transactional, func(c *gin.Context) { c.String(http.StatusCreated, "made") })
	ch.post(t, "k")
	assert.True(t, ch.post(t, "k").replayed)
	assert.Equal(t, 400, ch.post(t, "").status, "key-missing")
	assert.Equal(t, 1, ch.reached, "requests that reached the rest of the chain")
}

// TestStreamingSettlesEarly: a handler that flushes or hijacks streams,
// and its result cannot be replayed: a retry gets 500
// result-unavailable and the handler never runs again.
func TestStreamingSettlesEarly(t *testing.T) {
	for name, h := range map[string]gin.HandlerFunc{
		"Flush": func(c *gin.Context) {
			c.Status(http.StatusCreated)
			_, _ = c.Writer.WriteString("part1 ")
			c.Writer.Flush()
			_, _ = c.Writer.WriteString("part2")
		},
		"Hijack": func(c *gin.Context) {
			conn, rw, err := c.Writer.Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			_, _ = rw.WriteString("HTTP/1.1 201 Created\r\nContent-Length: 11\r\nConnection: close\r\n\r\npart1 part2")
			_ = rw.Flush()
		},
	} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			ch := newChain(t, server.Transactional, func(c *gin.Context) { calls++; h(c) })
			got := ch.post(t, "k")
			assert.Equal(t, http.StatusCreated, got.status)
			assert.Equal(t, "part1 part2", got.body)
			got = ch.post(t, "k")
			assert.Equal(t, http.StatusInternalServerError, got.status)
			assert.Contains(t, got.problem, "result-unavailable")
			assert.Equal(t, 1, calls, "the handler ran once")
		})
	}
}

// TestLeaseInRequestContext: a Leased handler finds its lease in
// c.Request.Context().
func TestLeaseInRequestContext(t *testing.T) {
	ch := newChain(t, server.Leased, func(c *gin.Context) {
		_, ok := server.LeaseFrom(c.Request.Context())
		c.String(http.StatusCreated, "%v", ok)
	})
	assert.Equal(t, "true", ch.post(t, "k").body)
}
