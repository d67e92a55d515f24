package api

import (
	"bytes"
	"net/http"
)

// recorder is an http.ResponseWriter that keeps a response in memory: a
// reconcile function has the handlers' own code write the response of a
// settled operation into one, and problemMux learns ServeMux's answer to
// an unrouted request from one.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header {
	if r.header == nil {
		r.header = http.Header{}
	}
	return r.header
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
