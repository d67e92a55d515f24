package server

import (
	"bytes"
	"encoding/hex"
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
		digest = fingerprint(newFPInput(r, s.route(r), []byte(body), s.fpHeaders))
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
	in := &fpInput{method: "POST", route: "POST /x/", body: []byte(`{}`), subtree: "/x/1"}
	c := &Claim{Digest: fingerprint(in), DigestAlg: fingerprintAlg, in: in}
	other := &fpInput{method: "POST", route: "POST /x/", body: []byte(`{}`), subtree: "/x/2"}
	zeros := bytes.Repeat([]byte{0}, 32)
	assert.True(t, c.Matches(fingerprintAlg, fingerprintV3(in)))
	assert.False(t, c.Matches(fingerprintAlg, fingerprintV3(other)), "v3 tells the paths under a catch-all apart")
	assert.False(t, c.Matches(fingerprintAlg, zeros))
	assert.True(t, c.Matches(fingerprintAlgV2, fingerprintV2(in)), "a v2 record is compared with v2")
	assert.False(t, c.Matches(fingerprintAlgV2, fingerprintV2(other)), "v2 tells the paths under a catch-all apart")
	assert.False(t, c.Matches(fingerprintAlgV2, fingerprintV3(in)))
	assert.True(t, c.Matches(fingerprintAlgV1, fingerprintV1(in)), "a v1 record is compared with v1")
	assert.True(t, c.Matches(fingerprintAlgV1, fingerprintV1(other)), "v1 never saw the path under a catch-all")
	assert.False(t, c.Matches(fingerprintAlgV1, zeros))
	assert.True(t, c.Matches("sha3-v9", []byte{1}), "an unknown algorithm is accepted")
}

// A record stored under sha256-v2 is compared with v2, which sorted names
// that fold together: an honest retry replays, and so (v2's flaw, left to
// its records) does the body with those members in the other order; under
// v3 that body is another request.
func TestMatchesUnderV2SortsNamesThatFoldTogether(t *testing.T) {
	body := func(s string) *fpInput { return &fpInput{method: "POST", route: "POST /v1/payments", body: []byte(s)} }
	first := body(`{"amount_cents":100,"AMOUNT_CENTS":5000}`)
	honest := &Claim{Digest: fingerprint(first), DigestAlg: fingerprintAlg, in: first}
	swapped := body(`{"AMOUNT_CENTS":5000,"amount_cents":100}`)
	other := &Claim{Digest: fingerprint(swapped), DigestAlg: fingerprintAlg, in: swapped}
	assert.True(t, honest.Matches(fingerprintAlgV2, fingerprintV2(first)), "an honest retry of a v2 record")
	assert.True(t, other.Matches(fingerprintAlgV2, fingerprintV2(first)), "v2 cannot tell the orders apart")
	assert.True(t, honest.Matches(fingerprintAlg, fingerprintV3(first)))
	assert.False(t, other.Matches(fingerprintAlg, fingerprintV3(first)), "v3 tells the orders apart")
}

func TestScopeHashSeparatesParts(t *testing.T) {
	a := scopeHash("t", "p", "POST /x", "k")
	assert.Equal(t, a, scopeHash("t", "p", "POST /x", "k"))
	for _, other := range [][4]string{{"tp", "", "POST /x", "k"}, {"t", "pPOST /x", "", "k"}, {"", "t", "p", "POST /xk"}, {"t", "p", "POST /x", "k2"}} {
		assert.NotEqual(t, a, scopeHash(other[0], other[1], other[2], other[3]), "%q", other)
	}
}

// TestDigestsAreStable pins sha256-v1, -v2, -v3 and the scope hash: stored
// records hold these digests, so a change of their bytes would turn honest
// retries into 422s and make stored records unreachable. A new algorithm
// needs a new name.
func TestDigestsAreStable(t *testing.T) {
	in := &fpInput{method: "POST", route: "POST /v1/{acct}/payments", pathValues: [][2]string{{"acct", "a1"}},
		headers: [][2]string{{"Api-Version", "2"}}, body: []byte(`{"b":1, "a":[1.0,"x"]}`)}
	raw := &fpInput{method: "PATCH", route: "PATCH /x", pathValues: [][2]string{{"", "/x"}}, body: []byte("a=1&b=2")}
	sub := &fpInput{method: "POST", route: "POST /v1/accounts/", body: []byte(`{}`), subtree: "/v1/accounts/a%2F1"}
	folds := &fpInput{method: "POST", route: "POST /v1/payments", body: []byte(`{"b":{"a":1,"A":2}, "a":0}`)}
	scope := scopeHash("t", "p", "POST /v1/payments", "k1")
	assert.Equal(t, "24ebe1bb765e63498ae8c6d1c7bc5903ea65aeefba0ba75b90beefc8d7d55427", hex.EncodeToString(fingerprintV1(in)))
	assert.Equal(t, "1704783c9d573062bd787614d3e049c065a647e96efa48e8a1d4e002f25d5f03", hex.EncodeToString(fingerprintV1(raw)))
	assert.Equal(t, "70f0ad954baccc7ead5e3681800a331cb3f7c980db561c9e28d94992c4962d1b", hex.EncodeToString(fingerprintV2(in)))
	assert.Equal(t, "73be8894df1576bf2afc9570ed7560000dfe241c0218e7fab34ef2298d6a502b", hex.EncodeToString(fingerprintV2(raw)))
	assert.Equal(t, "07f34f7a6f7bb6fe28a528e427f45ecfc3675d17ad964075e8237821326066ed", hex.EncodeToString(fingerprintV2(sub)))
	assert.Equal(t, "89dc9e5845de6c6d9b254cbe05b30b95e2184592e4185e68b7bde4c9ba586eaf", hex.EncodeToString(fingerprintV2(folds)))
	assert.Equal(t, "b05cd1e26f17e4c4678b5841883cf7d983b15029462c308bb603b6bf20da5c1c", hex.EncodeToString(fingerprintV3(in)))
	assert.Equal(t, "c4e69f2fa888ce5b1279b7f24a1e6467c99fdf772401f5ae5f3ae9f7240a0fce", hex.EncodeToString(fingerprintV3(raw)))
	assert.Equal(t, "2404094ad373aac9a7d697c2fb0fc030b7797122b4860269c171ee9294cbc05e", hex.EncodeToString(fingerprintV3(sub)))
	assert.Equal(t, "f7d2502afba56bc20631df018bae4529bb9e9aea9f1b7533b475d125c5dc24ae", hex.EncodeToString(fingerprintV3(folds)))
	assert.Equal(t, "ef9afb478c59661c77645e1d260f4511e166d680bac46f18aab376d4e2039f1a", hex.EncodeToString(scope[:]))
}

func BenchmarkFingerprint(b *testing.B) {
	in := &fpInput{method: "POST", route: "POST /v1/payments", body: []byte(`{"account":7,"amount":25}`)}
	b.ReportAllocs()
	for b.Loop() {
		_ = fingerprint(in)
		_ = scopeHash("tenant", "principal", "POST /v1/payments", "8e03978e-40d5-43e8-bc93-6894a57f9324")
	}
}
