package main

import (
	"net/http/httptest"
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
