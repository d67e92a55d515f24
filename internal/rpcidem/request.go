package rpcidem

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
)

// NewRequest is the request an adapter hands to server.Adapter for one
// call: a POST of body to route (the method's full name, a path) with
// header h, under ctx. It is what http.NewRequestWithContext gives for the
// path, built without parsing it as a URL: the core reads the method,
// the path, the header, the body and the context.
func NewRequest(ctx context.Context, route string, h http.Header, body []byte) *http.Request {
	r := &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: route},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
	}
	return r.WithContext(ctx)
}
