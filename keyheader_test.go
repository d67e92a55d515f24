package idem

import (
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// KeyHeader is the contract's header, spelled out where go doc shows it,
// and the Observer's breaker states are idem's own type (issue 18).
func TestGoDocShowsNoInternals(t *testing.T) {
	assert.Equal(t, wire.HeaderKey, KeyHeader)
	if testing.Short() {
		t.Skip("go doc: skipped in -short mode")
	}
	out, err := exec.Command("go", "doc", ".", "KeyHeader").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), `const KeyHeader = "Idempotency-Key"`)
	out, err = exec.Command("go", "doc", ".", "Observer").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "OnBreakerChange func(host string, from, to BreakerState)")
	assert.NotContains(t, string(out), "gobreaker")
	out, err = exec.Command("go", "doc", "-all", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Empty(t, regexp.MustCompile(`\b(gobreaker|rate|uuid)\.[A-Z]\w*`).FindAllString(string(out), -1),
		"no identifier of a dependency anywhere in the package's documentation")
}

// Config.KeyHeader names the header the key travels in (issue 18): a
// generated key, and a caller's key set under that name.
func TestConfigKeyHeader(t *testing.T) {
	var got []http.Header
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Header.Clone())
		return statusBase(new(int), "", nil, 201)(r)
	})
	tr, _ := newTestTransport(t, Config{Base: base, KeyHeader: "paypal-request-id"})

	resp, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/", `{}`))
	require.NoError(t, err)
	discard(resp)
	require.Len(t, got, 1)
	assert.NotEmpty(t, got[0].Get("PayPal-Request-Id"))
	assert.Empty(t, got[0].Get(KeyHeader), "no key under the default name")

	req := post(t, context.Background(), "http://api.test/", `{}`)
	req.Header.Set("PayPal-Request-Id", "mine")
	resp, err = tr.RoundTrip(req)
	require.NoError(t, err)
	discard(resp)
	assert.Equal(t, []string{"mine"}, got[1]["Paypal-Request-Id"], "the caller's key, and only it")

	req = post(t, context.Background(), "http://api.test/", `{}`)
	req.Header.Add("PayPal-Request-Id", "a")
	req.Header.Add("PayPal-Request-Id", "b")
	_, err = tr.RoundTrip(req)
	require.ErrorIs(t, err, ErrKeyInvalid)
	assert.Contains(t, err.Error(), "2 Paypal-Request-Id headers")

	assert.PanicsWithValue(t, `idem: Config.KeyHeader "bad header" is not a valid header field name`,
		func() { NewTransport(Config{KeyHeader: "bad header"}) })
}
