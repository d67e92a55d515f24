package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/http"

	"github.com/idemkit/idem/internal/fingerprint"
)

// requestFormat is the first byte of a stored request (the request column
// of a [Leased] record): then the method, the request URI (path and query),
// the ServeMux pattern, the number of path values and each name and
// value, the header block (encodeHeader) and the body, every field
// prefixed by its length as a uvarint.
const requestFormat = 1

// errStoredRequest is returned for a stored request this version cannot
// read.
var errStoredRequest = errors.New("server: stored request is corrupt or of an unknown format")

// storedHeaders are the request headers a [Leased] record keeps besides
// [Config.FingerprintHeaders]: what a reconciler needs to read the body.
// Credentials and cookies are never stored.
var storedHeaders = []string{"Content-Type", "Content-Language"}

// encodeRequest gives the stored form of r, whose body was read (body),
// as a reconciler gets it back: method, path and query, pattern, path
// values, the Content-Type and Content-Language headers and those of
// fpHeaders, and the body.
func encodeRequest(r *http.Request, fpHeaders []string, body []byte) []byte {
	h := http.Header{}
	for _, name := range append(storedHeaders[:len(storedHeaders):len(storedHeaders)], fpHeaders...) {
		if values := r.Header.Values(name); len(values) > 0 {
			h[http.CanonicalHeaderKey(name)] = values
		}
	}
	b := make([]byte, 0, 64+len(body))
	b = append(b, requestFormat)
	b = appendString(b, r.Method)
	b = appendString(b, r.URL.RequestURI())
	b = appendString(b, r.Pattern)
	var values [][2]string
	for _, name := range fingerprint.Wildcards(r.Pattern) {
		values = append(values, [2]string{name, r.PathValue(name)})
	}
	b = binary.AppendUvarint(b, uint64(len(values)))
	for _, v := range values {
		b = appendString(appendString(b, v[0]), v[1])
	}
	b = appendString(b, string(encodeHeader(h)))
	return append(b, body...)
}

// decodeRequest rebuilds a request that encodeRequest stored, under ctx.
func decodeRequest(ctx context.Context, b []byte) (*http.Request, error) {
	if len(b) == 0 || b[0] != requestFormat {
		return nil, errStoredRequest
	}
	d := headerDecoder{b: b[1:], ok: true}
	method, uri, pattern := d.string(), d.string(), d.string()
	count := d.uvarint()
	if !d.ok || count > uint64(len(d.b)) { // each value takes at least two bytes
		return nil, errStoredRequest
	}
	values := make([][2]string, count)
	for i := range values {
		values[i] = [2]string{d.string(), d.string()}
	}
	block := d.string()
	if !d.ok {
		return nil, errStoredRequest
	}
	h, err := decodeHeader([]byte(block))
	if err != nil {
		return nil, errStoredRequest
	}
	body := d.b
	r, err := http.NewRequestWithContext(ctx, method, uri, bytes.NewReader(body))
	if err != nil {
		return nil, errors.Join(errStoredRequest, err)
	}
	r.Header, r.Pattern, r.RequestURI = h, pattern, uri
	for _, v := range values {
		r.SetPathValue(v[0], v[1])
	}
	return r, nil
}
