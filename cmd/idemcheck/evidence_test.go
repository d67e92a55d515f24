package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/conformance"
)

// The tests of this file check that a verdict rests on the evidence the
// run has: a count, ids, or the bodies alone.

// checkOf runs the command with args and the named check, and returns its
// result.
func checkOf(t *testing.T, name string, args ...string) conformance.Result {
	t.Helper()
	_, doc := idemcheckJSON(t, append(args, "-checks", name)...)
	res, ok := findCheck(doc, name)
	require.True(t, ok, "checks:\n%s", pretty(doc))
	return res
}

// countedArgs are fakeArgs without -id-field: the count is the evidence.
func countedArgs(srv *httptest.Server) []string { return without(fakeArgs(srv), "-id-field") }

// bodiesOnlyArgs are fakeArgs without ids and count: the bodies are the
// only evidence.
func bodiesOnlyArgs(srv *httptest.Server) []string {
	return without(without(countedArgs(srv), "-count-url"), "-count-field")
}

// A correct server whose responses name no resource: with a count, the
// scope check decides by the count; with the bodies alone, identical
// bytes cannot tell a replay from a second operation, and only a replay
// mark shows a leak.
func TestScopeByTheEvidence(t *testing.T) {
	t.Parallel()
	_, srv := newFakeAPI(t, quirkAnonymous, "")
	res := checkOf(t, "scope", countedArgs(srv)...)
	assert.Equal(t, conformance.Pass, res.Verdict, res.Detail)
	assert.Contains(t, res.Detail, "the count grew by 2")
	res = checkOf(t, "scope", bodiesOnlyArgs(srv)...)
	assert.Equal(t, conformance.NotApplicable, res.Verdict, res.Detail)
	assert.Contains(t, res.Detail, "cannot tell")

	_, leaky := newFakeAPI(t, quirkAnonymous|flawNoScope|flawUnmarkedReplays, "") // only the count shows the leak
	res = checkOf(t, "scope", countedArgs(leaky)...)
	assert.Equal(t, conformance.Fail, res.Verdict, res.Detail)
	assert.Contains(t, res.Detail, "the count grew by 1")
	assert.Contains(t, res.Detail, "leaked across principals")
	res = checkOf(t, "scope", bodiesOnlyArgs(leaky)...)
	assert.Equal(t, conformance.NotApplicable, res.Verdict, "the same server, with the bodies alone: %s", res.Detail)

	_, marked := newFakeAPI(t, quirkAnonymous|flawNoScope, "")
	res = checkOf(t, "scope", bodiesOnlyArgs(marked)...)
	assert.Equal(t, conformance.Fail, res.Verdict, "a replay mark is evidence: %s", res.Detail)
	assert.Contains(t, res.Detail, "marked as a replay (201, Idempotent-Replayed: true)")
}

// A correct server slower than -attempt-timeout answers the retry of an
// attempt that timed out with a plain 409: the operation's outcome is
// unknown (the first attempt may still take effect), not a failure, and
// with no operation shown ok the check cannot judge: n/a, with the advice
// to give a larger -attempt-timeout.
func TestFaultsWithAServerSlowerThanTheAttemptTimeout(t *testing.T) {
	t.Parallel()
	_, srv := newFakeAPI(t, quirkSlow, "")
	res := checkOf(t, "faults", append(fakeArgs(srv), "-n", "6", "-attempt-timeout", "100ms")...)
	assert.Equal(t, conformance.NotApplicable, res.Verdict, res.Detail)
	assert.Contains(t, res.Detail, "0 ok, 0 failed, 6 unknown; 6 effects")
	assert.Regexp(t, `[1-9]\d* attempts timed out \(-attempt-timeout 100ms\) besides the proxy's slow responses: the server may take longer than that to answer: rerun with a larger -attempt-timeout`, res.Detail)
}

// hostile serves POST with a 201 that handler writes, and GET with an
// empty count; every request is answered the same, whatever its key.
func hostile(t *testing.T, handler func(w http.ResponseWriter)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		handler(w)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// ignoresKeys is a server that ignores keys and answers every request
// with the same 201 and body.
func ignoresKeys(t *testing.T) *httptest.Server {
	return hostile(t, func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	})
}

// A 201 whose body never ends is cut at the checker's cap and is an
// error, not a complete response.
func TestEndlessBodyIsAnError(t *testing.T) {
	t.Parallel()
	srv := hostile(t, func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusCreated)
		chunk := bytes.Repeat([]byte(`{"payment_id":"pay_1"}`), 1000)
		for { // until the checker hangs up
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	code, doc := idemcheckJSON(t, "-url", srv.URL+"/v1/payments", "-checks", "concurrent")
	assert.Equal(t, exitFail, code)
	base, _ := findCheck(doc, "baseline")
	assert.Equal(t, conformance.Fail, base.Verdict)
	assert.Contains(t, base.Detail, "201, cut short (the body is over 1 MiB, the checker's limit)")
}

// Response headers are capped at 64 KiB: more is an error, not a
// response, so that the checker's memory stays bounded; less is read.
func TestOversizedHeadersAreAnError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		size int
		want conformance.Verdict
	}{{48 << 10, conformance.Pass}, {conformance.MaxHeaderBytes + 1, conformance.Fail}, {2 << 20, conformance.Fail}} {
		big := strings.Repeat("x", tt.size)
		srv := hostile(t, func(w http.ResponseWriter) {
			w.Header().Set("X-Big", big)
			w.WriteHeader(http.StatusCreated)
		})
		base := checkOf(t, "baseline", "-url", srv.URL+"/v1/payments")
		assert.Equal(t, tt.want, base.Verdict, "a header of %d bytes: %s", tt.size, base.Detail)
		if tt.want == conformance.Fail {
			assert.Contains(t, base.Detail, "server response headers exceeded 65536 bytes")
		}
	}
}

// A server that ignores keys and always sends the same body: without a
// count, its duplicates are identical responses, not replays, and the
// concurrent check cannot pass on them.
func TestConcurrentIdenticalResponsesWithoutACount(t *testing.T) {
	t.Parallel()
	srv := ignoresKeys(t)
	res := checkOf(t, "concurrent", "-url", srv.URL+"/v1/payments", "-concurrency", "8")
	assert.Equal(t, conformance.NotApplicable, res.Verdict, res.Detail)
	assert.Contains(t, res.Detail, "21 identical responses, 0 of them marked with Idempotent-Replayed")
	assert.NotContains(t, res.Detail, "replays of it")

	_, marking := newFakeAPI(t, quirkAnonymous, "") // honours keys and marks its replays
	res = checkOf(t, "concurrent", bodiesOnlyArgs(marking)...)
	assert.Equal(t, conformance.Pass, res.Verdict, res.Detail)
	assert.Regexp(t, `3 rounds of 8 requests at once with one key: one response each, \d+ identical responses, all marked with Idempotent-Replayed, \d+ told to wait`, res.Detail)

	_, counted := newFakeAPI(t, quirkAnonymous|flawUnmarkedReplays, "")
	res = checkOf(t, "concurrent", countedArgs(counted)...)
	assert.Equal(t, conformance.Pass, res.Verdict, "the count shows one effect per round: %s", res.Detail)
	assert.Regexp(t, `one response each, \d+ replays of it, \d+ told to wait; the count grew by 3`, res.Detail)
}

// A server that ignores keys and answers every request with the same
// bytes cannot pass the replay check on those bytes alone: without a
// replay mark, an id or a count the check cannot tell, as the concurrent
// check cannot. With a mark the same server fails.
func TestReplayIdenticalBytesWithoutEvidence(t *testing.T) {
	t.Parallel()
	srv := ignoresKeys(t)
	res := checkOf(t, "replay", "-url", srv.URL+"/v1/payments", "-replayed-header", "")
	assert.Equal(t, conformance.NotApplicable, res.Verdict, res.Detail)
	assert.Contains(t, res.Detail, "cannot tell: the repeat got the same 201 and body")

	res = checkOf(t, "replay", "-url", srv.URL+"/v1/payments")
	assert.Equal(t, conformance.Fail, res.Verdict, res.Detail)

	_, honest := newFakeAPI(t, quirkAnonymous, "") // honours keys; its count shows it
	res = checkOf(t, "replay", append(countedArgs(honest), "-replayed-header", "")...)
	assert.Equal(t, conformance.Pass, res.Verdict, res.Detail)
}

// A duplicate told to wait passes only when the wait ends: the key must
// replay within -wait-timeout. A server whose lock stays taken once a
// duplicate met it answers 409 for good, and fails; a slow one that
// releases it passes.
func TestConcurrentWaitMustEnd(t *testing.T) {
	_, srv := newFakeAPI(t, flawLockNeverReleased|quirkSlow, "")
	res := checkOf(t, "concurrent", append(fakeArgs(srv), "-wait-timeout", "3s")...)
	assert.Equal(t, conformance.Fail, res.Verdict, res.Detail)
	assert.Contains(t, res.Detail, "never replayed")
	assert.NotEmpty(t, res.Evidence)

	_, srv = newFakeAPI(t, quirkSlow, "")
	res = checkOf(t, "concurrent", fakeArgs(srv)...)
	assert.Equal(t, conformance.Pass, res.Verdict, res.Detail)
}
