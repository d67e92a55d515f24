package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/conformance"
)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no url", []string{"-body", "{}"}, "-url is required"},
		{"unknown check", []string{"-url", "http://127.0.0.1:1/x", "-checks", "replay,nope"}, `unknown check "nope" (valid: baseline, replay, body-mismatch, key-missing, key-invalid, concurrent, scope, faults, outcome, equivalent-json)`},
		{"host not named", []string{"-url", "http://api.example.com/v1/payments"}, "-allow-host api.example.com"},
		{"count url host not named", []string{"-url", "http://127.0.0.1:1/x", "-count-url", "http://10.0.0.1/c", "-count-field", "n"}, "-allow-host 10.0.0.1"},
		{"count url without field", []string{"-url", "http://127.0.0.1:1/x", "-count-url", "http://127.0.0.1:1/c"}, "a count URL and a count field go together"},
		{"verify url without id", []string{"-url", "http://127.0.0.1:1/x", "-verify-url", "http://127.0.0.1:1/p/{id}", "-id-field", "id"}, ""},
		{"bad placeholder", []string{"-url", "http://127.0.0.1:1/x", "-body", `{"n": {{num}}}`}, "unknown placeholder {{num}}"},
		{"bad header", []string{"-url", "http://127.0.0.1:1/x", "-header", "Authorization Bearer x"}, "is not 'Name: value'"},
		{"concurrency out of range", []string{"-url", "http://127.0.0.1:1/x", "-concurrency", "500"}, "concurrency must be 2 to 64"},
		{"too many operations", []string{"-url", "http://127.0.0.1:1/x", "-n", "5000"}, "operations must be 1 to 1000"},
		{"no operations", []string{"-url", "http://127.0.0.1:1/x", "-n", "0"}, "-n cannot be 0"},
		{"no key length", []string{"-url", "http://127.0.0.1:1/x", "-max-key-len", "0"}, "-max-key-len cannot be 0"},
		{"no concurrency", []string{"-url", "http://127.0.0.1:1/x", "-concurrency", "0"}, "-concurrency cannot be 0"},
		{"argument", []string{"-url", "http://127.0.0.1:1/x", "extra"}, "no arguments are taken"},
		{"unknown flag", []string{"-nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == "" { // valid flags: they must parse
				_, err := parseFlags(tt.args, &testWriter{t})
				require.NoError(t, err)
				return
			}
			code, stdout, stderr := idemcheck(t, tt.args...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tt.want)
		})
	}
}

// testWriter logs what it is given.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func TestAllowHostAcceptsANamedHost(t *testing.T) {
	o, err := parseFlags([]string{"-url", "https://staging.example.com/v1/payments", "-allow-host", "staging.example.com"}, &testWriter{t})
	require.NoError(t, err)
	assert.Equal(t, []string{"staging.example.com"}, o.cfg.AllowHosts)
	assert.Empty(t, o.cfg.Header.Get("Content-Type"), "an empty body is not JSON")
}

func TestJSONBodyGetsAContentType(t *testing.T) {
	o, err := parseFlags([]string{"-url", "http://127.0.0.1:1/x", "-body", `{"n": {{n}}}`}, &testWriter{t})
	require.NoError(t, err)
	assert.Equal(t, "application/json", o.cfg.Header.Get("Content-Type"))
	o, err = parseFlags([]string{"-url", "http://127.0.0.1:1/x", "-body", `{"n": 1}`, "-header", "Content-Type: application/vnd.x+json"}, &testWriter{t})
	require.NoError(t, err)
	assert.Equal(t, "application/vnd.x+json", o.cfg.Header.Get("Content-Type"))
}

func TestTableShowsFailuresWithEvidence(t *testing.T) {
	_, srv := newFakeAPI(t, flawNoBodyCompare, "")
	code, stdout, _ := idemcheck(t, append(fakeArgs(srv), "-checks", "body-mismatch,scope")...)
	assert.Equal(t, exitFail, code)
	for _, want := range []string{
		"idemcheck: POST " + srv.URL + "/v1/payments (key header Idempotency-Key)",
		"seed: 1 (-seed 1 meets the same faults again)",
		"CHECK          RESULT  DETAIL",
		"baseline       pass",
		"body-mismatch  FAIL    the different body got the first operation's response (201)",
		"scope          pass",
		"body-mismatch failed:\n  first request with a fresh key\n    > POST " + srv.URL + "/v1/payments (first principal, key ",
		"  the same key with another operation's body\n",
		"    < 201 (replayed: true)\n    < {\"payment_id\":",
		"FAIL: required checks failed: body-mismatch (2 pass, 1 fail, 0 n/a, 0 info)",
	} {
		assert.Contains(t, stdout, want)
	}
	assert.NotContains(t, stdout, "Bearer", "credentials are never printed")
	assert.NotContains(t, stdout, "\nfaults ", "-checks runs only the checks named, and baseline")
}

func TestChecksNotApplicableWithoutTheirConfiguration(t *testing.T) {
	_, srv := newFakeAPI(t, flawNone, "")
	code, doc := idemcheckJSON(t, "-url", srv.URL+"/v1/payments", "-body", `{"amount_cents": 100}`,
		"-header", "Authorization: Bearer alice", "-seed", "1")
	assert.Equal(t, exitPass, code)
	assert.True(t, doc.Passed)
	assert.Equal(t, map[string]conformance.Verdict{
		"baseline": conformance.Pass, "replay": conformance.Pass,
		"body-mismatch":   conformance.NotApplicable, // no placeholder: no other body
		"key-missing":     conformance.NotApplicable, // no -key-required
		"key-invalid":     conformance.Pass,
		"concurrent":      conformance.Pass,
		"scope":           conformance.NotApplicable, // no -principal2
		"faults":          conformance.NotApplicable, // no -count-url
		"outcome":         conformance.Info,          // the fake tells no operation state
		"equivalent-json": conformance.Info,
	}, doc.verdicts(), "checks:\n%s", pretty(doc))
	for _, c := range doc.Checks {
		if c.Verdict == conformance.Pass {
			assert.Equal(t, "bodies", c.Basis, c.Name)
		}
	}
}

func TestBaselineFailureStopsTheRun(t *testing.T) {
	_, srv := newFakeAPI(t, flawNone, "")
	code, doc := idemcheckJSON(t, "-url", srv.URL+"/v1/payments", "-seed", "1") // no credentials: 401
	assert.Equal(t, exitFail, code)
	base, _ := findCheck(doc, "baseline")
	assert.Equal(t, conformance.Fail, base.Verdict)
	assert.Contains(t, base.Detail, "a request with a fresh key got 401")
	for _, c := range doc.Checks[1:] {
		assert.Equal(t, conformance.NotApplicable, c.Verdict, c.Name)
		assert.Equal(t, "not run: baseline failed", c.Detail)
	}
}

func TestCustomKeyHeader(t *testing.T) {
	_, srv := newFakeAPI(t, flawNone, "X-Request-Key")
	code, doc := idemcheckJSON(t, append(fakeArgs(srv), "-key-header", "X-Request-Key")...)
	assert.Equal(t, exitPass, code, "checks:\n%s", pretty(doc))
	faults, _ := findCheck(doc, "faults")
	assert.Equal(t, conformance.Pass, faults.Verdict, faults.Detail)
	assert.Contains(t, faults.Detail, "12 ok, 0 failed, 0 unknown", "every operation went through with the renamed header")
}

func TestSeedRepeatsTheFaults(t *testing.T) {
	_, srv := newFakeAPI(t, flawNone, "")
	details := make([]string, 3)
	for i, seed := range []string{"7", "7", "8"} {
		_, doc := idemcheckJSON(t, append(fakeArgs(srv), "-checks", "faults", "-n", "8", "-seed", seed)...)
		faults, ok := findCheck(doc, "faults")
		require.True(t, ok)
		require.Equal(t, conformance.Pass, faults.Verdict, faults.Detail)
		details[i] = faults.Detail
	}
	assert.Equal(t, details[0], details[1], "the same seed must meet the same faults")
	assert.NotEqual(t, details[0], details[2], "another seed should meet other faults")
}

func TestReplayedHeader(t *testing.T) {
	_, srv := newFakeAPI(t, flawUnmarkedReplays, "")
	_, doc := idemcheckJSON(t, append(fakeArgs(srv), "-checks", "replay")...)
	replay, _ := findCheck(doc, "replay")
	assert.Equal(t, conformance.Fail, replay.Verdict)
	assert.Contains(t, replay.Detail, `the repeat is not marked with Idempotent-Replayed (got "")`)

	code, doc := idemcheckJSON(t, append(fakeArgs(srv), "-checks", "replay", "-replayed-header", "")...)
	assert.Equal(t, exitPass, code, "checks:\n%s", pretty(doc))
}

// A server whose replays carry another mark than the flag's: the failure
// shows the repeat's headers and names the flag to set.
func TestReplayedHeaderOfAnotherName(t *testing.T) {
	_, srv := newFakeAPI(t, flawReplayMarkedOtherwise, "")
	_, doc := idemcheckJSON(t, append(fakeArgs(srv), "-checks", "replay")...)
	replay, _ := findCheck(doc, "replay")
	assert.Equal(t, conformance.Fail, replay.Verdict)
	assert.Contains(t, replay.Detail, "X-Idempotent-Replay: true", "the repeat's headers are shown")
	assert.Contains(t, replay.Detail, "-replayed-header X-Idempotent-Replay", "the flag is suggested")
	require.Len(t, replay.Evidence, 2)
	assert.Equal(t, "true", replay.Evidence[1].Response.Header.Get("X-Idempotent-Replay"), "the evidence holds the headers")

	code, doc := idemcheckJSON(t, append(fakeArgs(srv), "-checks", "replay", "-replayed-header", "X-Idempotent-Replay")...)
	assert.Equal(t, exitPass, code, "checks:\n%s", pretty(doc))
}

func TestScopeNotApplicableWhenTheSecondPrincipalIsRefused(t *testing.T) {
	_, srv := newFakeAPI(t, flawNone, "")
	args := append(without(fakeArgs(srv), "-principal2"), "-checks", "scope", "-principal2", "Authorization: Basic bm9ib2R5")
	code, doc := idemcheckJSON(t, args...)
	assert.Equal(t, exitPass, code)
	scope, _ := findCheck(doc, "scope")
	assert.Equal(t, conformance.NotApplicable, scope.Verdict)
	assert.Contains(t, scope.Detail, "the second principal could not make the request (401)")
}

// without returns args without the flag name and its value.
func without(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == name {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// An API that takes UUIDs only: the default keys (UUIDs) pass its
// baseline; prefixed keys fail it, and the failure blames the key.
func TestKeyFormat(t *testing.T) {
	_, srv := newFakeAPI(t, flawUUIDKeysOnly, "")
	code, doc := idemcheckJSON(t, append(fakeArgs(srv), "-checks", "replay,key-invalid")...)
	assert.Equal(t, exitFail, code, "key-invalid gets a 500")
	assert.Equal(t, map[string]conformance.Verdict{"baseline": conformance.Pass, "replay": conformance.Pass, "key-invalid": conformance.Fail},
		doc.verdicts(), "checks:\n%s", pretty(doc))
	invalid, _ := findCheck(doc, "key-invalid")
	require.Len(t, invalid.Evidence, 2)
	nonASCII := invalid.Evidence[1].Request.Key
	assert.Len(t, nonASCII, 36, "a plain UUID's 36 bytes by default, its last two made ü: %q", nonASCII)
	assert.Equal(t, 35, utf8.RuneCountInString(nonASCII), nonASCII)
	assert.True(t, strings.HasSuffix(nonASCII, "ü"), nonASCII)

	code, doc = idemcheckJSON(t, append(fakeArgs(srv), "-key-format", "prefixed")...)
	assert.Equal(t, exitFail, code)
	base, _ := findCheck(doc, "baseline")
	assert.Equal(t, conformance.Fail, base.Verdict)
	assert.Contains(t, base.Detail, "a request with a fresh key got 500, and the response names the key")
	assert.Contains(t, base.Detail, "(46 characters, -key-format prefixed)")
	assert.Contains(t, base.Detail, "try -key-format uuid")
	assert.True(t, strings.HasPrefix(base.Evidence[0].Request.Key, "idemcheck-"), base.Evidence[0].Request.Key)

	code, _, stderr := idemcheck(t, append(fakeArgs(srv), "-key-format", "ulid")...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `key format "ulid" is not uuid or prefixed`)
}
