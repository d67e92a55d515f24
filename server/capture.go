package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
)

// errResultNotCommitted is returned by Write after the response had to be
// streamed and its result could not be committed: the client got a
// problem document instead, and the handler's further output is dropped.
var errResultNotCommitted = errors.New("server: response dropped: its result could not be committed")

type captureState int

const (
	buffering captureState = iota // everything is held until the outcome is durable
	streaming                     // the outcome is durable; output goes straight out
	dropped                       // the outcome could not be made durable; output is dropped
)

// capture is the ResponseWriter a claimed handler writes to. It holds the
// response until the middleware has committed its outcome, so that a client
// never sees a result that did not commit. A handler that flushes, hijacks,
// or outgrows the cap makes it settle early, by the status it chose
// (onStream: the operation's own outcome commits as result-unavailable, a
// 5xx or a rejection rolls back or releases), and from then on output
// streams through.
type capture struct {
	rw       http.ResponseWriter
	header   http.Header
	status   int
	body     bytes.Buffer
	limit    int
	state    captureState
	onStream func() error // settles the outcome early; set by the runner
}

func newCapture(rw http.ResponseWriter, limit int) *capture {
	return &capture{rw: rw, header: http.Header{}, limit: limit}
}

// Header is the handler's header map; once streaming, the real one.
func (c *capture) Header() http.Header {
	if c.state == streaming {
		return c.rw.Header()
	}
	return c.header
}

// WriteHeader records the status. Informational statuses other than 101
// go out at once, as net/http sends them.
func (c *capture) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http does
	}
	switch {
	case c.state == streaming:
		c.rw.WriteHeader(code)
	case c.state == dropped || c.status != 0:
	case code < 200 && code != http.StatusSwitchingProtocols:
		copyHeader(c.rw.Header(), c.header)
		c.rw.WriteHeader(code)
	default:
		c.status = code
	}
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 && c.state == buffering {
		c.WriteHeader(http.StatusOK)
	}
	switch {
	case c.state == streaming:
		return c.rw.Write(p)
	case c.state == dropped:
		return 0, errResultNotCommitted
	case !bodyAllowed(c.status):
		return 0, http.ErrBodyNotAllowed
	case c.body.Len()+len(p) > c.limit:
		if err := c.stream(true); err != nil {
			return 0, err
		}
		return c.rw.Write(p)
	default:
		return c.body.Write(p)
	}
}

// FlushError settles the outcome early and flushes: a handler that streams
// gets streaming, at the price of a result that cannot be replayed.
func (c *capture) FlushError() error {
	if c.status == 0 && c.state == buffering {
		c.WriteHeader(http.StatusOK)
	}
	if err := c.stream(true); err != nil {
		return err
	}
	return http.NewResponseController(c.rw).Flush()
}

// Flush implements http.Flusher.
func (c *capture) Flush() { _ = c.FlushError() }

// Hijack settles the outcome early and hands over the connection.
func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if err := c.stream(false); err != nil {
		return nil, nil, err
	}
	return http.NewResponseController(c.rw).Hijack()
}

// Unwrap lets http.ResponseController reach the real writer for deadlines.
func (c *capture) Unwrap() http.ResponseWriter { return c.rw }

// stream settles the outcome (once) and sends what was buffered.
func (c *capture) stream(send bool) error {
	switch c.state {
	case streaming:
		return nil
	case dropped:
		return errResultNotCommitted
	}
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if err := c.onStream(); err != nil {
		c.state = dropped
		return errResultNotCommitted
	}
	c.state = streaming
	if send {
		c.send(false)
	}
	return nil
}

// finish fills in what net/http would: the 200 of a handler that wrote
// nothing, and a sniffed Content-Type.
func (c *capture) finish() {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if _, ok := c.header["Content-Type"]; !ok && c.body.Len() > 0 && bodyAllowed(c.status) {
		c.header.Set("Content-Type", http.DetectContentType(c.body.Bytes()))
	}
}

// send writes the captured response to the client.
func (c *capture) send(withLength bool) {
	h := c.rw.Header()
	copyHeader(h, c.header)
	if withLength && bodyAllowed(c.status) && h.Get("Content-Length") == "" && h.Get("Transfer-Encoding") == "" {
		h.Set("Content-Length", strconv.Itoa(c.body.Len()))
	}
	c.rw.WriteHeader(c.status)
	if c.body.Len() > 0 {
		_, _ = c.rw.Write(c.body.Bytes())
	}
}

// response is the captured response as it is stored: allowlisted headers.
func (c *capture) response(state recordState, allow func(string) bool) *Response {
	res := &Response{Unavailable: state == stateUnavailable, Status: c.status, Header: http.Header{}}
	if state == stateDone {
		// Names in sorted order, as net/http sends them, so that values
		// set under two spellings of one name ("content-type" and
		// "Content-Type") are stored in the order the client saw them.
		var buf [16]string
		names := buf[:0]
		for name := range c.header {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if canon := http.CanonicalHeaderKey(name); allow(canon) {
				res.Header[canon] = append(res.Header[canon], c.header[name]...)
			}
		}
		res.Body = c.body.Bytes()
	}
	return res
}

func copyHeader(dst, src http.Header) {
	for name, values := range src {
		dst[name] = values
	}
}

// bodyAllowed reports whether a status may carry a body (RFC 9110).
func bodyAllowed(status int) bool {
	return (status < 100 || status > 199) && status != http.StatusNoContent && status != http.StatusNotModified
}
