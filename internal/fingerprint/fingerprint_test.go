package fingerprint

import (
	"encoding/hex"
	"net/http"
	"net/http/httptest"
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
		assert.Equal(t, want, Wildcards(pattern), "Wildcards(%q)", pattern)
	}
}

// inputOf routes one request through a mux on pattern and returns its
// Input.
func inputOf(t *testing.T, pattern, target string, header http.Header) *Input {
	t.Helper()
	var in *Input
	mux := http.NewServeMux()
	mux.HandleFunc(pattern, func(_ http.ResponseWriter, r *http.Request) {
		in = NewInput(r, r.Pattern, []byte("{}"), []string{"Api-Version"})
	})
	req := httptest.NewRequest(http.MethodPost, target, nil)
	req.Header = header
	mux.ServeHTTP(httptest.NewRecorder(), req)
	require.NotNil(t, in, "POST %s did not reach %q", target, pattern)
	return in
}

func TestNewInput(t *testing.T) {
	in := inputOf(t, "POST /v1/{acct}/payments/{id}", "/v1/a1/payments/p%2F2?x=1", http.Header{"Api-Version": {"1", "2"}})
	assert.Equal(t, &Input{Method: "POST", Route: "POST /v1/{acct}/payments/{id}",
		PathValues: [][2]string{{"acct", "a1"}, {"id", "p/2"}}, Headers: [][2]string{{"Api-Version", "1\n2"}}, Body: []byte("{}")}, in)
	sub := inputOf(t, "POST /v1/accounts/", "/v1/accounts/a%2F1", http.Header{})
	assert.Equal(t, "/v1/accounts/a%2F1", sub.Subtree, "a catch-all pattern keeps the escaped path")
	assert.Equal(t, [][2]string{{"Api-Version", ""}}, sub.Headers, "a configured header that is absent counts as empty")
	assert.Nil(t, sub.PathValues)
}

func TestScopeHashSeparatesParts(t *testing.T) {
	a := Scope("t", "p", "POST /x", "k")
	assert.Equal(t, a, Scope("t", "p", "POST /x", "k"))
	for _, other := range [][4]string{{"tp", "", "POST /x", "k"}, {"t", "pPOST /x", "", "k"}, {"", "t", "p", "POST /xk"}, {"t", "p", "POST /x", "k2"}} {
		assert.NotEqual(t, a, Scope(other[0], other[1], other[2], other[3]), "%q", other)
	}
}

// TestDigestsAreStable pins sha256-v1, -v2, -v3 and the scope hash: stored
// records hold these digests, so a change of their bytes would turn honest
// retries into 422s and make stored records unreachable. A new algorithm
// needs a new name.
func TestDigestsAreStable(t *testing.T) {
	in := &Input{Method: "POST", Route: "POST /v1/{acct}/payments", PathValues: [][2]string{{"acct", "a1"}},
		Headers: [][2]string{{"Api-Version", "2"}}, Body: []byte(`{"b":1, "a":[1.0,"x"]}`)}
	raw := &Input{Method: "PATCH", Route: "PATCH /x", PathValues: [][2]string{{"", "/x"}}, Body: []byte("a=1&b=2")}
	sub := &Input{Method: "POST", Route: "POST /v1/accounts/", Body: []byte(`{}`), Subtree: "/v1/accounts/a%2F1"}
	folds := &Input{Method: "POST", Route: "POST /v1/payments", Body: []byte(`{"b":{"a":1,"A":2}, "a":0}`)}
	scope := Scope("t", "p", "POST /v1/payments", "k1")
	assert.Equal(t, "24ebe1bb765e63498ae8c6d1c7bc5903ea65aeefba0ba75b90beefc8d7d55427", hex.EncodeToString(v1(in)))
	assert.Equal(t, "1704783c9d573062bd787614d3e049c065a647e96efa48e8a1d4e002f25d5f03", hex.EncodeToString(v1(raw)))
	assert.Equal(t, "70f0ad954baccc7ead5e3681800a331cb3f7c980db561c9e28d94992c4962d1b", hex.EncodeToString(v2(in)))
	assert.Equal(t, "73be8894df1576bf2afc9570ed7560000dfe241c0218e7fab34ef2298d6a502b", hex.EncodeToString(v2(raw)))
	assert.Equal(t, "07f34f7a6f7bb6fe28a528e427f45ecfc3675d17ad964075e8237821326066ed", hex.EncodeToString(v2(sub)))
	assert.Equal(t, "89dc9e5845de6c6d9b254cbe05b30b95e2184592e4185e68b7bde4c9ba586eaf", hex.EncodeToString(v2(folds)))
	assert.Equal(t, "b05cd1e26f17e4c4678b5841883cf7d983b15029462c308bb603b6bf20da5c1c", hex.EncodeToString(v3(in)))
	assert.Equal(t, "c4e69f2fa888ce5b1279b7f24a1e6467c99fdf772401f5ae5f3ae9f7240a0fce", hex.EncodeToString(v3(raw)))
	assert.Equal(t, "2404094ad373aac9a7d697c2fb0fc030b7797122b4860269c171ee9294cbc05e", hex.EncodeToString(v3(sub)))
	assert.Equal(t, "f7d2502afba56bc20631df018bae4529bb9e9aea9f1b7533b475d125c5dc24ae", hex.EncodeToString(v3(folds)))
	assert.Equal(t, "ef9afb478c59661c77645e1d260f4511e166d680bac46f18aab376d4e2039f1a", hex.EncodeToString(scope[:]))
}

func BenchmarkFingerprint(b *testing.B) {
	in := &Input{Method: "POST", Route: "POST /v1/payments", Body: []byte(`{"account":7,"amount":25}`)}
	b.ReportAllocs()
	for b.Loop() {
		_ = Sum(in)
		_ = Scope("tenant", "principal", "POST /v1/payments", "8e03978e-40d5-43e8-bc93-6894a57f9324")
	}
}
