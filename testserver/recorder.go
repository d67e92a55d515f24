package testserver

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
)

// recorder buffers a handler's response so that a fault can send it late,
// slowly, partly or not at all. Informational (1xx) headers are dropped.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder {
	return &recorder{header: make(http.Header)}
}

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(code int) {
	if rec.status != 0 || (code >= 100 && code < 200) {
		return
	}
	rec.status = code
}

func (rec *recorder) Write(b []byte) (int, error) {
	rec.WriteHeader(http.StatusOK)
	return rec.body.Write(b)
}

// Flush does nothing: the response is sent when the fault decides.
func (rec *recorder) Flush() {}

// statusCode is the handler's status: 200 when it wrote nothing, as
// net/http would send.
func (rec *recorder) statusCode() int {
	if rec.status == 0 {
		return http.StatusOK
	}
	return rec.status
}

// copyHeader sets the recorded headers on w with an exact Content-Length.
func (rec *recorder) copyHeader(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range rec.header {
		h[k] = append([]string(nil), v...)
	}
	h.Del("Transfer-Encoding")
	h.Set("Content-Length", strconv.Itoa(rec.body.Len()))
}

// head renders the status line and headers for a raw write on a hijacked
// connection, declaring the full Content-Length and Connection: close.
func (rec *recorder) head() []byte {
	var b bytes.Buffer
	status := rec.statusCode()
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	h := rec.header.Clone()
	for _, k := range []string{"Content-Length", "Transfer-Encoding", "Connection"} {
		h.Del(k)
	}
	h.Set("Content-Length", strconv.Itoa(rec.body.Len()))
	h.Set("Connection", "close")
	_ = h.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// countingWriter passes a response through to net/http, counting what
// went out.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (cw *countingWriter) WriteHeader(code int) {
	if cw.status == 0 && (code < 100 || code >= 200) {
		cw.status = code
	}
	cw.ResponseWriter.WriteHeader(code)
}

func (cw *countingWriter) Write(b []byte) (int, error) {
	if cw.status == 0 {
		cw.status = http.StatusOK
	}
	n, err := cw.ResponseWriter.Write(b)
	cw.n += int64(n)
	return n, err
}

// Flush flushes the underlying writer, for streaming handlers and the
// reverse proxy.
func (cw *countingWriter) Flush() {
	_ = http.NewResponseController(cw.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (cw *countingWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

// statusOut is the status that went out: 200 when the handler wrote
// nothing, as net/http sends.
func (cw *countingWriter) statusOut() int {
	if cw.status == 0 {
		return http.StatusOK
	}
	return cw.status
}
