package rpcidem

import (
	"bytes"
	"net/http"
)

// Recorder is the http.ResponseWriter an adapter answers to: it keeps
// the first status, the header and the body. It is not safe for
// concurrent use.
type Recorder struct {
	header http.Header
	// Code is the first status written, 0 before any.
	Code int
	// Body is what was written.
	Body bytes.Buffer
}

// NewRecorder is a Recorder whose header is h, which must not be nil.
func NewRecorder(h http.Header) *Recorder { return &Recorder{header: h} }

// Header is the response's header.
func (w *Recorder) Header() http.Header { return w.header }

// WriteHeader keeps code unless a status was written already.
func (w *Recorder) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
}

// Write appends p to Body, after a 200 status if none was written.
func (w *Recorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.Body.Write(p)
}

// WriteResult answers w with res, encoded, as contentType and with the
// HTTP status code; when encodeErr says that res could not be encoded,
// with an empty 500 instead, which the server never stores. It sets no
// Content-Length: the server's capture sets it, and never stores it.
func WriteResult(w http.ResponseWriter, contentType string, code int, res *Result, encodeErr error) {
	var body []byte
	if encodeErr != nil {
		code = http.StatusInternalServerError
	} else {
		body = res.Encode()
	}
	w.Header()["Content-Type"] = []string{contentType}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
