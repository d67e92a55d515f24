package idem

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bodyServer records the body of every request and drops the response to
// the first, so that the call needs to re-send the body.
func bodyServer(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		n := len(bodies)
		mu.Unlock()
		if n == 1 {
			dropFIN(w)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bodies...)
	}
}

// plainBody returns a keyed POST whose body is a plain io.Reader, without
// GetBody, and a flag set when the body is closed.
func plainBody(t *testing.T, url, body string) (*http.Request, *bool) {
	t.Helper()
	req := post(t, context.Background(), url, "")
	closed := new(bool)
	req.Body = &closeFlag{Reader: strings.NewReader(body), closed: closed}
	req.GetBody, req.ContentLength = nil, -1
	return req, closed
}

type closeFlag struct {
	io.Reader
	closed *bool
}

func (c *closeFlag) Close() error { *c.closed = true; return nil }

// Config.BufferRequestBody (issue 18): a plain io.Reader body that fits is
// re-sent whole after an ambiguous attempt; a longer one is sent once and
// the error says why it was not re-sent.
func TestBufferRequestBody(t *testing.T) {
	const body = `{"amount_cents":1250,"currency":"EUR"}`
	t.Run("fits", func(t *testing.T) {
		srv, bodies := bodyServer(t)
		tr, _ := newTestTransport(t, Config{BufferRequestBody: int64(len(body))})
		req, closed := plainBody(t, srv.URL, body)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		discard(resp)
		assert.Equal(t, []string{body, body}, bodies())
		assert.True(t, *closed, "the caller's body is closed")
	})
	t.Run("over the cap", func(t *testing.T) {
		srv, bodies := bodyServer(t)
		tr, _ := newTestTransport(t, Config{BufferRequestBody: 10})
		req, closed := plainBody(t, srv.URL, body)
		_, err := tr.RoundTrip(req)
		require.ErrorIs(t, err, ErrNotRewindable)
		assert.Contains(t, err.Error(), "longer than Config.BufferRequestBody (10 bytes)")
		assert.Equal(t, []string{body}, bodies(), "sent once, whole")
		assert.True(t, *closed)
	})
	t.Run("off", func(t *testing.T) {
		srv, bodies := bodyServer(t)
		tr, _ := newTestTransport(t, Config{})
		req, _ := plainBody(t, srv.URL, body)
		_, err := tr.RoundTrip(req)
		require.ErrorIs(t, err, ErrNotRewindable)
		assert.Contains(t, err.Error(), "no GetBody")
		assert.Len(t, bodies(), 1)
	})
}

// A body that cannot be read into the buffer fails the call before
// anything is sent.
func TestBufferRequestBodyReadError(t *testing.T) {
	calls := 0
	tr, _ := newTestTransport(t, Config{Base: statusBase(&calls, "", nil, 201), BufferRequestBody: 1 << 10})
	req := post(t, context.Background(), "http://api.test/", "")
	broken := errors.New("disk gone")
	body := &closeCounter{Reader: io.MultiReader(strings.NewReader("{"), errReader{broken})}
	req.Body, req.GetBody = body, nil
	_, err := tr.RoundTrip(req)
	require.ErrorIs(t, err, broken)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, NotSent, e.Certainty)
	assert.Zero(t, calls)
	assert.EqualValues(t, 1, body.closes.Load(), "the caller's body is closed once")
}
