package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
)

// digestOf routes one request through a mux on pattern and returns the
// fingerprint the middleware would store.
func digestOf(t *testing.T, pattern, method, target, body string, headers ...string) []byte {
	t.Helper()
	var digest []byte
	mux := http.NewServeMux()
	mux.HandleFunc(pattern, func(_ http.ResponseWriter, r *http.Request) {
		s := newSettings(Config{FingerprintHeaders: []string{"api-version"}})
		digest = fingerprint.Sum(fingerprint.NewInput(r, s.route(r), []byte(body), s.fpHeaders))
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
	const catchAll = "POST /v1/accounts/"
	sub1 := digestOf(t, catchAll, "POST", "/v1/accounts/1", `{}`)
	assert.Equal(t, sub1, digestOf(t, catchAll, "POST", "/v1/accounts/1?trace=1", `{}`), "catch-all, same path")
	assert.NotEqual(t, sub1, digestOf(t, catchAll, "POST", "/v1/accounts/2", `{}`), "catch-all, another path under it")
	raw1 := digestOf(t, p, "POST", "/v1/accounts/a1/payments", "a=1&b=2")
	raw2 := digestOf(t, p, "POST", "/v1/accounts/a1/payments", "a=1&b=2 ")
	assert.NotEqual(t, raw1, raw2, "a non-JSON body is hashed byte for byte")
}

func TestMatchesComparesUnderTheStoredAlgorithm(t *testing.T) {
	in := &fingerprint.Input{Method: "POST", Route: "POST /x/", Body: []byte(`{}`), Subtree: "/x/1"}
	c := &Claim{Digest: fingerprint.Sum(in), DigestAlg: fingerprint.Alg, in: in}
	other := &fingerprint.Input{Method: "POST", Route: "POST /x/", Body: []byte(`{}`), Subtree: "/x/2"}
	zeros := bytes.Repeat([]byte{0}, 32)
	assert.True(t, c.Matches(fingerprint.Alg, sumWith(t, fingerprint.Alg, in)))
	assert.False(t, c.Matches(fingerprint.Alg, sumWith(t, fingerprint.Alg, other)), "v3 tells the paths under a catch-all apart")
	assert.False(t, c.Matches(fingerprint.Alg, zeros))
	assert.True(t, c.Matches(fingerprint.AlgV2, sumWith(t, fingerprint.AlgV2, in)), "a v2 record is compared with v2")
	assert.False(t, c.Matches(fingerprint.AlgV2, sumWith(t, fingerprint.AlgV2, other)), "v2 tells the paths under a catch-all apart")
	assert.False(t, c.Matches(fingerprint.AlgV2, sumWith(t, fingerprint.Alg, in)))
	assert.True(t, c.Matches(fingerprint.AlgV1, sumWith(t, fingerprint.AlgV1, in)), "a v1 record is compared with v1")
	assert.True(t, c.Matches(fingerprint.AlgV1, sumWith(t, fingerprint.AlgV1, other)), "v1 never saw the path under a catch-all")
	assert.False(t, c.Matches(fingerprint.AlgV1, zeros))
	assert.True(t, c.Matches("sha3-v9", []byte{1}), "an unknown algorithm is accepted")
}

// A record stored under sha256-v2 is compared with v2, which sorted names
// that fold together: an honest retry replays, and so (v2's flaw, left to
// its records) does the body with those members in the other order; under
// v3 that body is another request.
func TestMatchesUnderV2SortsNamesThatFoldTogether(t *testing.T) {
	body := func(s string) *fingerprint.Input {
		return &fingerprint.Input{Method: "POST", Route: "POST /v1/payments", Body: []byte(s)}
	}
	first := body(`{"amount_cents":100,"AMOUNT_CENTS":5000}`)
	honest := &Claim{Digest: fingerprint.Sum(first), DigestAlg: fingerprint.Alg, in: first}
	swapped := body(`{"AMOUNT_CENTS":5000,"amount_cents":100}`)
	other := &Claim{Digest: fingerprint.Sum(swapped), DigestAlg: fingerprint.Alg, in: swapped}
	assert.True(t, honest.Matches(fingerprint.AlgV2, sumWith(t, fingerprint.AlgV2, first)), "an honest retry of a v2 record")
	assert.True(t, other.Matches(fingerprint.AlgV2, sumWith(t, fingerprint.AlgV2, first)), "v2 cannot tell the orders apart")
	assert.True(t, honest.Matches(fingerprint.Alg, sumWith(t, fingerprint.Alg, first)))
	assert.False(t, other.Matches(fingerprint.Alg, sumWith(t, fingerprint.Alg, first)), "v3 tells the orders apart")
}

// sumWith is the digest of in by the known algorithm alg.
func sumWith(t *testing.T, alg string, in *fingerprint.Input) []byte {
	t.Helper()
	digest, ok := fingerprint.SumWith(alg, in)
	require.True(t, ok, "fingerprint.SumWith(%q) does not know the algorithm", alg)
	return digest
}
