package server

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"strings"
)

// The fingerprint algorithms. The name of the one that made a digest is
// stored beside it; a new algorithm gets a new name and fingerprintWith
// keeps computing the old ones, so that a change never turns an honest
// retry of a stored request into 422 key-reused.
const (
	// fingerprintAlg names fingerprintV3, the algorithm of new records.
	fingerprintAlg = "sha256-v3"
	// fingerprintAlgV2 names fingerprintV2, which sorted the members of
	// every object, so that {"amount":100,"AMOUNT":5000} and
	// {"AMOUNT":5000,"amount":100}, which encoding/json reads as 5000 and
	// 100, had one digest; records stored with it are still compared with
	// it.
	fingerprintAlgV2 = "sha256-v2"
	// fingerprintAlgV1 names fingerprintV1, which also left out the path
	// under a catch-all pattern ("POST /v1/accounts/"); records stored
	// with it are still compared with it.
	fingerprintAlgV1 = "sha256-v1"
)

// fpInput is what an operation depends on (docs/CONTRACT.md §3).
type fpInput struct {
	method, route string
	pathValues    [][2]string // in pattern order
	headers       [][2]string // the configured headers, in config order
	body          []byte
	// subtree is the escaped path of a request routed by a catch-all
	// pattern (one that ends in "/"), which the pattern does not name:
	// "POST /v1/accounts/1" and "/2" are two operations. fingerprintV1
	// leaves it out.
	subtree string
}

// newFPInput collects the fingerprint input of r, whose body was read.
func newFPInput(r *http.Request, route string, body []byte, fpHeaders []string) *fpInput {
	in := &fpInput{method: r.Method, route: route, body: body}
	if r.Pattern == "" {
		in.pathValues = [][2]string{{"", r.URL.EscapedPath()}}
	}
	if strings.HasSuffix(r.Pattern, "/") {
		in.subtree = r.URL.EscapedPath()
	}
	for _, name := range wildcards(r.Pattern) {
		in.pathValues = append(in.pathValues, [2]string{name, r.PathValue(name)})
	}
	for _, name := range fpHeaders {
		in.headers = append(in.headers, [2]string{name, strings.Join(r.Header.Values(name), "\n")})
	}
	return in
}

// wildcards returns the wildcard names of a ServeMux pattern, in order:
// "POST /v1/{acct}/files/{path...}" gives acct, path.
func wildcards(pattern string) []string {
	var names []string
	for {
		open := strings.IndexByte(pattern, '{')
		if open < 0 {
			return names
		}
		end := strings.IndexByte(pattern[open:], '}')
		if end < 0 {
			return names
		}
		name := strings.TrimSuffix(pattern[open+1:open+end], "...")
		if name != "$" && name != "" {
			names = append(names, name)
		}
		pattern = pattern[open+end+1:]
	}
}

// fingerprint is the digest of in that a new record stores, beside the
// name fingerprintAlg.
func fingerprint(in *fpInput) []byte { return fingerprintV3(in) }

// fingerprintWith computes the digest of in with the named algorithm, and
// reports whether the algorithm is known.
func fingerprintWith(alg string, in *fpInput) ([]byte, bool) {
	switch alg {
	case fingerprintAlg:
		return fingerprintV3(in), true
	case fingerprintAlgV2:
		return fingerprintV2(in), true
	case fingerprintAlgV1:
		return fingerprintV1(in), true
	default:
		return nil, false
	}
}

// fingerprintV3 is fingerprintV2 under its own name with the body in
// canonicalJSON's form: an object with two member names that a
// case-insensitive decoder matches as one keeps its members in document
// order. Its bytes must never change (the test pins them): a new algorithm
// gets a new name.
func fingerprintV3(in *fpInput) []byte {
	return sha256Fields(fingerprintAlg, in, true, canonicalJSON)
}

// fingerprintV2 is fingerprintV1 under its own name with the subtree of a
// catch-all pattern after the path values. Its bytes must never change
// (the test pins them).
func fingerprintV2(in *fpInput) []byte {
	return sha256Fields(fingerprintAlgV2, in, true, canonicalJSONV2)
}

// fingerprintV1 is SHA-256 over length-prefixed fields: the algorithm's
// name, method, route, path values, headers, then the body as canonical
// JSON (canonicalJSONV2, tagged "json") or its raw bytes (tagged "raw").
// Its bytes must never change (the test pins them).
func fingerprintV1(in *fpInput) []byte {
	return sha256Fields(fingerprintAlgV1, in, false, canonicalJSONV2)
}

func sha256Fields(alg string, in *fpInput, subtree bool, canonical func([]byte) ([]byte, bool)) []byte {
	var buf [256]byte
	b := appendFields(buf[:0], alg, in.method, in.route)
	b = appendPairs(b, in.pathValues)
	if subtree {
		b = appendFields(b, in.subtree)
	}
	b = appendPairs(b, in.headers)
	body, tag := in.body, "raw"
	if canon, ok := canonical(in.body); ok {
		body, tag = canon, "json"
	}
	b = appendFields(b, tag)
	b = appendLen(b, len(body))
	if len(b)+len(body) <= len(buf) { // one buffer, hashed without a heap copy
		sum := sha256.Sum256(append(b, body...))
		return sum[:]
	}
	h := sha256.New()
	_, _ = h.Write(b)
	_, _ = h.Write(body)
	return h.Sum(nil)
}

func appendPairs(b []byte, pairs [][2]string) []byte {
	b = appendLen(b, len(pairs))
	for _, p := range pairs {
		b = appendFields(b, p[0], p[1])
	}
	return b
}

func appendFields(b []byte, fields ...string) []byte {
	for _, f := range fields {
		b = append(appendLen(b, len(f)), f...)
	}
	return b
}

func appendLen(b []byte, n int) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

// scopeHash is the record's identity: SHA-256 over the length-prefixed
// (tenant, principal, route, key), so that index keys stay 32 bytes
// whatever the lengths of the parts.
func scopeHash(tenant, principal, route, key string) [32]byte {
	var buf [256]byte
	return sha256.Sum256(appendFields(buf[:0], "idem-scope-v1", tenant, principal, route, key))
}
