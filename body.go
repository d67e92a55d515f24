package idem

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// drainLimit is how much of a discarded response body is read so that its
// connection can be reused; a longer body costs a new connection instead.
const drainLimit = 4 << 10

// requestBody hands out the body of each attempt: the caller's body first,
// then fresh copies from GetBody. A body without GetBody is handed out again
// only if the transport never read from it (the attempt was not sent).
type requestBody struct {
	orig    io.ReadCloser
	getBody func() (io.ReadCloser, error)
	once    *onceBody // wraps orig when it cannot be rewound
	used    bool      // orig (with GetBody) was handed to the transport, which closes it
	overCap int64     // the buffer that the body outgrew (Config.BufferRequestBody), 0 if none
}

// newRequestBody returns the body of req's call. When buffer is positive, a
// body without GetBody is read into memory, up to buffer bytes, so that it
// can be re-sent; a longer one keeps what was read in front of the rest and
// is sent once. The error is that of a body that could not be read.
func newRequestBody(req *http.Request, buffer int64) (requestBody, error) {
	b := requestBody{getBody: req.GetBody}
	if req.Body != nil && req.Body != http.NoBody {
		b.orig = req.Body
	}
	if b.orig == nil || b.getBody != nil || buffer <= 0 {
		return b, nil
	}
	buf, err := io.ReadAll(io.LimitReader(b.orig, buffer+1))
	if err != nil { // RoundTrip closes the body
		return requestBody{}, fmt.Errorf("reading the request body into memory (Config.BufferRequestBody): %w", err)
	}
	if int64(len(buf)) > buffer {
		b.orig = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(buf), b.orig), body: b.orig}
		b.overCap = buffer
		return b, nil
	}
	b.orig.Close()
	b.getBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	b.orig, _ = b.getBody()
	return b, nil
}

// prefixedBody is a body whose start was read into memory.
type prefixedBody struct {
	io.Reader
	body io.Closer
}

func (p *prefixedBody) Close() error { return p.body.Close() }

// next returns the body for the next attempt.
func (b *requestBody) next() (io.ReadCloser, error) {
	switch {
	case b.orig == nil:
		return nil, nil
	case !b.used && b.getBody != nil:
		b.used = true
		return b.orig, nil
	case b.getBody != nil:
		return b.getBody()
	case b.once == nil:
		b.once = &onceBody{rc: b.orig}
	}
	b.once.reuse()
	return b.once, nil
}

// resendable reports whether another attempt can carry the whole body.
func (b *requestBody) resendable() bool {
	return b.orig == nil || b.getBody != nil || b.once == nil || !b.once.wasRead()
}

// rewindable reports whether any number of attempts can carry the body at
// once, as hedges need: it has none, or GetBody.
func (b *requestBody) rewindable() bool {
	return b.orig == nil || b.getBody != nil
}

// why says why a body that is not resendable cannot be re-sent.
func (b *requestBody) why() string {
	if b.overCap > 0 {
		return fmt.Sprintf("the body is longer than Config.BufferRequestBody (%d bytes), so it was sent once and not kept", b.overCap)
	}
	return "the body was written once and has no GetBody to write it again"
}

// release ends the call: a body without GetBody is closed now, or when the
// transport is done with it; a body no attempt carried is closed now.
func (b *requestBody) release() {
	switch {
	case b.once != nil:
		b.once.release()
	case b.orig != nil && !b.used:
		b.orig.Close()
	}
}

// onceBody wraps a body that cannot be rewound. It remembers whether the
// transport read from it, and it defers the transport's Close until the call
// ends, so that an attempt that was never sent leaves it usable.
type onceBody struct {
	rc       io.ReadCloser
	mu       sync.Mutex
	read     bool
	closed   bool // the transport closed it during the call
	released bool // the call ended: Close goes through
}

func (o *onceBody) Read(p []byte) (int, error) {
	o.mu.Lock()
	o.read = true
	o.mu.Unlock()
	return o.rc.Read(p)
}

func (o *onceBody) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.released {
		return o.rc.Close()
	}
	o.closed = true
	return nil
}

func (o *onceBody) wasRead() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.read
}

func (o *onceBody) reuse() {
	o.mu.Lock()
	o.closed = false
	o.mu.Unlock()
}

func (o *onceBody) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released = true
	if o.closed {
		o.rc.Close()
	}
}

// closeRequestBody closes the body of a request that will not be sent.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// discard drains a little of a response body and closes it, so that its
// connection can be reused.
func discard(resp *http.Response) {
	if resp == nil {
		return
	}
	io.CopyN(io.Discard, resp.Body, drainLimit)
	resp.Body.Close()
}

// readAhead reads up to limit bytes of resp's body and puts them back in
// front of the rest. When the whole body fit, the connection is released and
// done is called at once; otherwise done is called when the body is closed.
// It returns the bytes read, and the error of a body cut short.
func readAhead(resp *http.Response, limit int64, done context.CancelFunc) ([]byte, error) {
	buf, err := readUpTo(resp, limit)
	if err != nil {
		resp.Body.Close()
		done()
		return buf, err
	}
	if int64(len(buf)) < limit { // the body ended: it is all in buf
		resp.Body.Close()
		done()
		resp.Body = &bufferedBody{Reader: *bytes.NewReader(buf)}
		return buf, nil
	}
	resp.Body = &aheadBody{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), body: resp.Body, done: done}
	return buf, nil
}

// readUpTo reads up to limit bytes of resp's body; fewer means it ended. A
// declared length that fits is read in one exact allocation (and one byte
// more, to see that the body really ends there).
func readUpTo(resp *http.Response, limit int64) ([]byte, error) {
	n := resp.ContentLength
	if n <= 0 || n >= limit {
		return io.ReadAll(io.LimitReader(resp.Body, limit))
	}
	buf := make([]byte, n+1)
	read, err := io.ReadFull(resp.Body, buf)
	switch {
	case int64(read) == n && err == io.ErrUnexpectedEOF: // ended as declared
		return buf[:read], nil
	case err == io.EOF:
		return nil, io.ErrUnexpectedEOF
	case err != nil:
		return buf[:read], err
	}
	// Longer than declared (a base RoundTripper that misreports it).
	rest, err := io.ReadAll(io.LimitReader(resp.Body, limit-n-1))
	return append(buf, rest...), err
}

// bufferedBody is a response body read ahead in full.
type bufferedBody struct{ bytes.Reader }

func (*bufferedBody) Close() error { return nil }

// aheadBody is a response body whose start was read ahead; closing it closes
// the real body and ends the attempt (its timeout).
type aheadBody struct {
	io.Reader
	body io.Closer
	done context.CancelFunc
}

func (a *aheadBody) Close() error {
	err := a.body.Close()
	a.done()
	return err
}

// cancelOnClose ends an attempt (its timeout) when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	done context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.done()
	return err
}
