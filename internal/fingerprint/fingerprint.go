// Package fingerprint computes what the server stores of a request to
// know a retry from another request under the same key: the digest of
// what the operation depends on (docs/CONTRACT.md §3), over the body in a
// canonical JSON form, and the scope hash that names a record. It is pure:
// no I/O, no state. Every digest's bytes are pinned by the tests, because
// stored records hold them.
package fingerprint

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"strings"
)

// The fingerprint algorithms. The name of the one that made a digest is
// stored beside it; a new algorithm gets a new name and SumWith keeps
// computing the old ones, so that a change never turns an honest
// retry of a stored request into 422 key-reused.
const (
	// Alg names v3, the algorithm of new records (Sum).
	Alg = "sha256-v3"
	// AlgV2 names v2, which sorted the members of
	// every object, so that {"amount":100,"AMOUNT":5000} and
	// {"AMOUNT":5000,"amount":100}, which encoding/json reads as 5000 and
	// 100, had one digest; records stored with it are still compared with
	// it.
	AlgV2 = "sha256-v2"
	// AlgV1 names v1, which also left out the path
	// under a catch-all pattern ("POST /v1/accounts/"); records stored
	// with it are still compared with it.
	AlgV1 = "sha256-v1"
)

// Input is what an operation depends on (docs/CONTRACT.md §3).
type Input struct {
	Method, Route string
	PathValues    [][2]string // in pattern order
	Headers       [][2]string // the configured headers, in config order
	Body          []byte
	// Subtree is the escaped path of a request routed by a catch-all
	// pattern (one that ends in "/"), which the pattern does not name:
	// "POST /v1/accounts/1" and "/2" are two operations. v1 leaves it
	// out.
	Subtree string
}

// NewInput collects the fingerprint input of r, whose body was read:
// route is the pattern it was routed by (or its method and path when no
// pattern routed it), headers the names of the headers that count, in
// canonical form. The path values come from r.Pattern's wildcards; the
// path itself stands in for them when r.Pattern is empty or does not name
// every part of the path that can vary (see explains).
func NewInput(r *http.Request, route string, body []byte, headers []string) *Input {
	return newInput(r, r.Pattern, route, body, headers)
}

// NewRoutedInput is NewInput for a request that another router routed
// (a framework adapter's route): its r.Pattern, if any, is in that
// router's syntax (echo v5 sets "/v1/accounts/:id"), not a ServeMux
// pattern, so the path stands in for the path values, as when no pattern
// routed it.
func NewRoutedInput(r *http.Request, route string, body []byte, headers []string) *Input {
	return newInput(r, "", route, body, headers)
}

func newInput(r *http.Request, pattern, route string, body []byte, headers []string) *Input {
	in := &Input{Method: r.Method, Route: route, Body: body}
	for _, name := range Wildcards(pattern) {
		in.PathValues = append(in.PathValues, [2]string{name, r.PathValue(name)})
	}
	if !explains(pattern, r.URL.Path, in.PathValues) {
		in.PathValues = append([][2]string{{"", r.URL.EscapedPath()}}, in.PathValues...)
	}
	if strings.HasSuffix(pattern, "/") {
		in.Subtree = r.URL.EscapedPath()
	}
	for _, name := range headers {
		in.Headers = append(in.Headers, [2]string{name, strings.Join(r.Header.Values(name), "\n")})
	}
	return in
}

// Wildcards returns the wildcard names of a ServeMux pattern, in order:
// "POST /v1/{acct}/files/{path...}" gives acct, path.
func Wildcards(pattern string) []string {
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

// Sum is the digest of in that a new record stores, beside the name Alg.
func Sum(in *Input) []byte { return v3(in) }

// SumWith computes the digest of in with the named algorithm, and reports
// whether the algorithm is known.
func SumWith(alg string, in *Input) ([]byte, bool) {
	switch alg {
	case Alg:
		return v3(in), true
	case AlgV2:
		return v2(in), true
	case AlgV1:
		return v1(in), true
	default:
		return nil, false
	}
}

// v3 is v2 under its own name with the body in
// canonicalJSON's form: an object with two member names that a
// case-insensitive decoder matches as one keeps its members in document
// order. Its bytes must never change (the test pins them): a new algorithm
// gets a new name.
func v3(in *Input) []byte {
	return sha256Fields(Alg, in, true, canonicalJSON)
}

// v2 is v1 under its own name with the subtree of a
// catch-all pattern after the path values. Its bytes must never change
// (the test pins them).
func v2(in *Input) []byte {
	return sha256Fields(AlgV2, in, true, canonicalJSONV2)
}

// v1 is SHA-256 over length-prefixed fields: the algorithm's
// name, method, route, path values, headers, then the body as canonical
// JSON (canonicalJSONV2, tagged "json") or its raw bytes (tagged "raw").
// Its bytes must never change (the test pins them).
func v1(in *Input) []byte {
	return sha256Fields(AlgV1, in, false, canonicalJSONV2)
}

func sha256Fields(alg string, in *Input, subtree bool, canonical func([]byte) ([]byte, bool)) []byte {
	var buf [256]byte
	b := appendFields(buf[:0], alg, in.Method, in.Route)
	b = appendPairs(b, in.PathValues)
	if subtree {
		b = appendFields(b, in.Subtree)
	}
	b = appendPairs(b, in.Headers)
	body, tag := in.Body, "raw"
	if canon, ok := canonical(in.Body); ok {
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

// Scope is the record's identity: SHA-256 over the length-prefixed
// (tenant, principal, route, key), so that index keys stay 32 bytes
// whatever the lengths of the parts.
func Scope(tenant, principal, route, key string) [32]byte {
	var buf [256]byte
	return sha256.Sum256(appendFields(buf[:0], "idem-scope-v1", tenant, principal, route, key))
}
