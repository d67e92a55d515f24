package conformance

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/testserver"
)

func TestScriptDependsOnSeedOperationAndAttemptOnly(t *testing.T) {
	rig := func(seed uint64) *faultRig {
		return &faultRig{r: newRunner(Config{URL: "http://127.0.0.1:1/x", Seed: seed, AttemptTimeout: time.Second})}
	}
	a, b, c := rig(42), rig(42), rig(43)
	for i, k := range faultKinds {
		s := a.script(i + 1)
		assert.Equal(t, k.kind, s[0].Kind, "operation %d meets %s on its first attempt", i+1, k.kind)
		assert.Equal(t, testserver.Fault{}, s[1], "and nothing after")
	}
	assert.Equal(t, 2*time.Second, a.script(3)[0].Delay, "a slow response outlasts the attempt timeout")
	differs := false
	for n := len(faultKinds) + 1; n <= 40; n++ {
		assert.Equal(t, a.script(n), b.script(n), "operation %d", n)
		differs = differs || !assert.ObjectsAreEqual(a.script(n), c.script(n))
	}
	assert.True(t, differs, "another seed gives other faults")
}

func TestRenameKeyMovesTheHeaderAndKeepsTheContext(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	rt := renameKey{base: http.DefaultTransport, name: "X-Request-Key"}
	traced := false
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { traced = true }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k-1")
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, "k-1", got.Get("X-Request-Key"))
	assert.Empty(t, got.Get("Idempotency-Key"))
	assert.Equal(t, "k-1", req.Header.Get("Idempotency-Key"), "the caller's request is not modified")
	assert.True(t, traced, "the connection trace of the request's context still fires")
}

func TestFaultsFailsWhenNoOperationSucceeds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte(`{"n": 0}`))
			return
		}
		http.Error(w, "insufficient funds", http.StatusPaymentRequired)
	}))
	defer srv.Close()
	r := newRunner(Config{URL: srv.URL + "/pay", Operations: 5, AttemptTimeout: 200 * time.Millisecond,
		Effects: Effects{CountURL: srv.URL + "/count", CountField: "n"}})
	defer r.close()
	res := checkFaults(context.Background(), r)
	assert.Equal(t, Fail, res.Verdict, res.Detail)
	assert.Contains(t, res.Detail, "0 ok, 5 failed, 0 unknown")
	assert.Contains(t, res.Detail, "no operation succeeded through the proxy")
}
