package rpcidem

import (
	"net/http"

	"github.com/idemkit/idem/internal/wire"
)

// CallHeader is the header [server.Adapter.ServeCall] takes for one call:
// the key, keyOf's when keyOf is set (a request field, AIP-155's
// request_id) and else the Idempotency-Key entry lookup finds, and each of
// the fingerprinted entries lookup finds, by their HTTP names. lookup
// returns the values of one entry of the call's metadata by its HTTP name,
// whatever the case the framework keeps it in.
func CallHeader(keyOf func() string, lookup func(name string) []string, fingerprinted []string) http.Header {
	h := http.Header{}
	if keyOf != nil {
		if key := keyOf(); key != "" {
			h[wire.HeaderKey] = []string{key}
		}
	} else if keys := lookup(wire.HeaderKey); len(keys) > 0 {
		h[wire.HeaderKey] = keys
	}
	for _, name := range fingerprinted {
		if vs := lookup(name); len(vs) > 0 {
			h[http.CanonicalHeaderKey(name)] = vs
		}
	}
	return h
}
