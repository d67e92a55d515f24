package ginidem

import (
	"bufio"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
)

// unwritten is the size of a response whose header has not been written.
const unwritten = -1

// writer is the [gin.ResponseWriter] of a claimed request: gin's own
// semantics (a status recorded until the first write or WriteHeaderNow)
// over idem's capture, so that every way gin writes is captured.
type writer struct {
	http.ResponseWriter // the capture
	orig                gin.ResponseWriter
	status              int
	size                int
}

var _ gin.ResponseWriter = (*writer)(nil)

// WriteHeader records the status, as gin does, until the header is written.
func (w *writer) WriteHeader(code int) {
	if code > 0 && !w.Written() {
		w.status = code
	}
}

// WriteHeaderNow writes the recorded status to the capture.
func (w *writer) WriteHeaderNow() {
	if !w.Written() {
		w.size = 0
		w.ResponseWriter.WriteHeader(w.status)
	}
}

func (w *writer) Write(b []byte) (int, error) {
	w.WriteHeaderNow()
	n, err := w.ResponseWriter.Write(b)
	w.size += n
	return n, err
}

func (w *writer) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	n, err := io.WriteString(w.ResponseWriter, s)
	w.size += n
	return n, err
}

func (w *writer) Status() int { return w.status }

func (w *writer) Size() int { return w.size }

func (w *writer) Written() bool { return w.size != unwritten }

// Flush settles the outcome early and streams, as net/http's Flush does
// under idem (docs/CONTRACT.md).
func (w *writer) Flush() {
	w.WriteHeaderNow()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack settles the outcome early and hands over the connection.
func (w *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.size < 0 {
		w.size = 0
	}
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// CloseNotify is gin's writer's.
func (w *writer) CloseNotify() <-chan bool { return w.orig.CloseNotify() }

// Pusher is nil: a pushed resource would leave before the outcome is
// durable.
func (w *writer) Pusher() http.Pusher { return nil }

// Unwrap lets http.ResponseController reach the capture.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
