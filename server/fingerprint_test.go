package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWildcards(t *testing.T) {
	tests := map[string][]string{
		"POST /v1/payments":                 nil,
		"POST /v1/{acct}/payments/{id}":     {"acct", "id"},
		"/files/{path...}":                  {"path"},
		"POST example.com/v1/{id}/{$}":      {"id"},
		"":                                  nil,
		"POST /broken/{unterminated":        nil,
		"PATCH /v1/accounts/{acct}/limits/": {"acct"},
	}
	for pattern, want := range tests {
		assert.Equal(t, want, wildcards(pattern), "wildcards(%q)", pattern)
	}
}

// digestOf routes one request through a mux on pattern and returns the
// fingerprint the middleware would store.
func digestOf(t *testing.T, pattern, method, target, body string, headers ...string) []byte {
	t.Helper()
	var digest []byte
	mux := http.NewServeMux()
	mux.HandleFunc(pattern, func(_ http.ResponseWriter, r *http.Request) {
		s := newSettings(Config{FingerprintHeaders: []string{"api-version"}})
		digest = fingerprintV1(newFPInput(r, s.route(r), []byte(body), s.fpHeaders))
	})
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	mux.ServeHTTP(httptest.NewRecorder(), req)
	require.NotNil(t, digest, "%s %s did not reach %q", method, target, pattern)
	return digest
}

func TestFingerprint(t *testing.T) {
	const p = "/v1/accounts/{acct}/payments"
	base := digestOf(t, p, "POST", "/v1/accounts/a1/payments", `{"amount":1,"note":"x"}`)
	same := map[string][]byte{
		"reordered JSON":         digestOf(t, p, "POST", "/v1/accounts/a1/payments", `{ "note":"x", "amount":1 }`),
		"query string":           digestOf(t, p, "POST", "/v1/accounts/a1/payments?trace=1", `{"amount":1,"note":"x"}`),
		"unselected header":      digestOf(t, p, "POST", "/v1/accounts/a1/payments", `{"amount":1,"note":"x"}`, "X-Request-Id", "r1"),
		"escaped JSON character": digestOf(t, p, "POST", "/v1/accounts/a1/payments", `{"amount":1,"note":"\u0078"}`),
	}
	for name, d := range same {
		assert.Equal(t, base, d, name)
	}
	different := map[string][]byte{
		"path value":      digestOf(t, p, "POST", "/v1/accounts/a2/payments", `{"amount":1,"note":"x"}`),
		"method":          digestOf(t, p, "PATCH", "/v1/accounts/a1/payments", `{"amount":1,"note":"x"}`),
		"number as typed": digestOf(t, p, "POST", "/v1/accounts/a1/payments", `{"amount":1.0,"note":"x"}`),
		"value":           digestOf(t, p, "POST", "/v1/accounts/a1/payments", `{"amount":2,"note":"x"}`),
		"selected header": digestOf(t, p, "POST", "/v1/accounts/a1/payments", `{"amount":1,"note":"x"}`, "Api-Version", "2"),
		"other pattern":   digestOf(t, "/v1/accounts/{acct}/{kind}", "POST", "/v1/accounts/a1/payments", `{"amount":1,"note":"x"}`),
	}
	for name, d := range different {
		assert.NotEqual(t, base, d, name)
	}
	raw1 := digestOf(t, p, "POST", "/v1/accounts/a1/payments", "a=1&b=2")
	raw2 := digestOf(t, p, "POST", "/v1/accounts/a1/payments", "a=1&b=2 ")
	assert.NotEqual(t, raw1, raw2, "a non-JSON body is hashed byte for byte")
}

func TestFingerprintWithUnknownAlgorithm(t *testing.T) {
	in := &fpInput{method: "POST", route: "POST /x", body: []byte(`{}`)}
	digest := fingerprintV1(in)
	assert.True(t, matches(in, fingerprintAlg, digest))
	assert.False(t, matches(in, fingerprintAlg, bytes.Repeat([]byte{0}, 32)))
	assert.True(t, matches(in, "sha3-v9", []byte{1}), "an unknown algorithm is accepted")
}

func TestScopeHashSeparatesParts(t *testing.T) {
	a := scopeHash("t", "p", "POST /x", "k")
	assert.Equal(t, a, scopeHash("t", "p", "POST /x", "k"))
	for _, other := range [][4]string{{"tp", "", "POST /x", "k"}, {"t", "pPOST /x", "", "k"}, {"", "t", "p", "POST /xk"}, {"t", "p", "POST /x", "k2"}} {
		assert.NotEqual(t, a, scopeHash(other[0], other[1], other[2], other[3]), "%q", other)
	}
}
