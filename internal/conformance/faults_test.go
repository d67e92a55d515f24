package conformance

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// A final 409, 425, 429 or 503 tells the client to wait: the operation
// may still run, so its outcome is unknown, never a definite failure.
func TestFaultsToldToWaitIsUnknown(t *testing.T) {
	for _, status := range []int{http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":"busy"}`))
		}))
		r := newRunner(Config{URL: srv.URL + "/pay", AttemptTimeout: 200 * time.Millisecond})
		g, err := r.newFaultRig()
		require.NoError(t, err)
		v := g.do(context.Background(), r.newKey(), []byte(`{}`))
		assert.Equal(t, testserver.OutcomeUnknown, v.kind, "a final %d: %v", status, v.err)
		g.close()
		r.close()
		srv.Close()
	}
}
