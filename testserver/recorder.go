package testserver

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
)

// finalStatus is the status of a response as net/http sends it: the first
// final (not 1xx) status written, 200 when none was.
type finalStatus struct {
	code int // 0 until set
}

// write notes a WriteHeader call (200 for a Write without one): code
// becomes the status unless it is a 1xx or the status is already set.
func (f *finalStatus) write(code int) {
	if f.code == 0 && (code < 100 || code >= 200) {
		f.code = code
	}
}

// get returns the status: 200 when the handler wrote nothing.
func (f *finalStatus) get() int {
	if f.code == 0 {
		return http.StatusOK
	}
	return f.code
}

// recorder buffers a handler's response so that a fault can send it late,
// slowly, partly or not at all. Informational (1xx) headers are dropped.
type recorder struct {
	header http.Header
	status finalStatus
	body   bytes.Buffer
}

func newRecorder() *recorder {
	return &recorder{header: make(http.Header)}
}

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(code int) { rec.status.write(code) }

func (rec *recorder) Write(b []byte) (int, error) {
	rec.WriteHeader(http.StatusOK)
	return rec.body.Write(b)
}

// Flush does nothing: the response is sent when the fault decides.
func (rec *recorder) Flush() {}

// statusCode is the handler's status: 200 when it wrote nothing, as
// net/http would send.
func (rec *recorder) statusCode() int { return rec.status.get() }

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
	status finalStatus
	n      int64
}

func (cw *countingWriter) WriteHeader(code int) {
	cw.status.write(code)
	cw.ResponseWriter.WriteHeader(code)
}

func (cw *countingWriter) Write(b []byte) (int, error) {
	cw.status.write(http.StatusOK)
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
func (cw *countingWriter) statusOut() int { return cw.status.get() }
