package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestCapture(limit int, settle error) (*capture, *httptest.ResponseRecorder, *int) {
	rec := httptest.NewRecorder()
	c := newCapture(rec, limit)
	settled := 0
	c.onStream = func() error { settled++; return settle }
	return c, rec, &settled
}

func TestCaptureHoldsTheResponse(t *testing.T) {
	c, rec, settled := newTestCapture(100, nil)
	c.Header().Set("X-A", "1")
	c.WriteHeader(http.StatusCreated)
	c.WriteHeader(http.StatusOK) // superfluous: ignored
	_, err := c.Write([]byte("<html>hello"))
	require.NoError(t, err)
	assert.False(t, rec.Flushed)
	assert.Empty(t, rec.Body.String(), "nothing leaves before the outcome is settled")
	c.finish()
	c.send(true)
	assert.Equal(t, http.StatusCreated, rec.Code)
	assert.Equal(t, "<html>hello", rec.Body.String())
	assert.Equal(t, "1", rec.Header().Get("X-A"))
	assert.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"), "sniffed, as net/http would")
	assert.Equal(t, "11", rec.Header().Get("Content-Length"))
	assert.Equal(t, 0, *settled)
}

func TestCaptureDefaults(t *testing.T) {
	c, _, _ := newTestCapture(100, nil)
	c.finish()
	assert.Equal(t, http.StatusOK, c.status, "a handler that writes nothing answers 200")
	_, typed := c.header["Content-Type"]
	assert.False(t, typed, "no body, no sniffing")

	c, _, _ = newTestCapture(100, nil)
	c.WriteHeader(http.StatusNoContent)
	_, err := c.Write([]byte("x"))
	assert.ErrorIs(t, err, http.ErrBodyNotAllowed)
	assert.Panics(t, func() { c.WriteHeader(42) }, "an invalid status panics like net/http")
}

func TestCaptureInformationalStatusGoesOut(t *testing.T) {
	c, rec, _ := newTestCapture(100, nil)
	c.Header().Set("Link", "</style.css>; rel=preload")
	c.WriteHeader(http.StatusEarlyHints)
	assert.Equal(t, 0, c.status, "1xx is not the final status")
	c.WriteHeader(http.StatusCreated)
	assert.Equal(t, http.StatusCreated, c.status)
	assert.Equal(t, "</style.css>; rel=preload", rec.Header().Get("Link"))
}

func TestCaptureStreamsOverTheCap(t *testing.T) {
	c, rec, settled := newTestCapture(4, nil)
	_, _ = c.Write([]byte("abc"))
	_, err := c.Write([]byte("defg"))
	require.NoError(t, err)
	assert.Equal(t, 1, *settled, "outgrowing the cap settles the outcome once")
	_, _ = c.Write([]byte("h"))
	assert.Equal(t, 1, *settled)
	assert.Equal(t, "abcdefgh", rec.Body.String())
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Nil(t, c.response(stateUnavailable, func(string) bool { return true }).Body, "no body is stored")
}

func TestCaptureDropsOutputWhenSettlingFails(t *testing.T) {
	c, rec, _ := newTestCapture(100, errors.New("commit failed"))
	_, _ = c.Write([]byte("partial"))
	assert.Error(t, c.FlushError())
	_, err := c.Write([]byte("more"))
	assert.ErrorIs(t, err, errResultNotCommitted)
	assert.Empty(t, rec.Body.String(), "the runner writes the problem; the handler's output is dropped")
	_, _, err = c.Hijack()
	assert.ErrorIs(t, err, errResultNotCommitted)
}

func TestCaptureStoresOnlyAllowedHeaders(t *testing.T) {
	s := newSettings(Config{ReplayHeaders: []string{"x-trace", "Set-Cookie"}})
	c, _, _ := newTestCapture(100, nil)
	h := c.Header()
	h.Add("X-Trace", "1")
	h.Add("X-Trace", "2")
	h["content-type"] = []string{"text/plain"} // a non-canonical key
	h.Set("Set-Cookie", "s=1")
	h.Set("Date", "Mon, 01 Jan 2024 00:00:00 GMT")
	h.Set("X-Other", "o")
	_, _ = c.Write([]byte("x"))
	res := c.response(stateDone, s.allow)
	assert.Equal(t, http.Header{"X-Trace": {"1", "2"}, "Content-Type": {"text/plain"}}, res.Header)
}

func TestCaptureStoresSpellingsOfOneNameInWireOrder(t *testing.T) {
	s := newSettings(Config{})
	for range 20 { // map order is random: a wrong merge fails about half the time
		c, _, _ := newTestCapture(100, nil)
		c.header["content-type"] = []string{"b"}
		c.header["Content-Type"] = []string{"a"}
		c.header["CONTENT-TYPE"] = []string{"0"}
		res := c.response(stateDone, s.allow)
		assert.Equal(t, []string{"0", "a", "b"}, res.Header["Content-Type"], "values in sorted-name order, as net/http sends them")
	}
}
