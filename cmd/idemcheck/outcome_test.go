package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/internal/conformance"
)

// TestOutcomeCheck: the outcome check passes a fake that tells where each
// operation stands, fails each fake that tells it wrong, and reports a
// fake that tells nothing as not offered (info), which fails no run.
func TestOutcomeCheck(t *testing.T) {
	tests := []struct {
		name    string
		flaw    flaw
		verdict conformance.Verdict
		detail  string
	}{
		{"tells the outcome", quirkOutcome | quirkSlow, conformance.Pass, "409 said in-flight, not safe, same reference"},
		{"tells nothing", quirkSlow, conformance.Info, "not offered"},
		{"tells all but the key's expiry", quirkOutcome | quirkSlow | quirkNoExpiry, conformance.Info,
			"not offered: Idempotency-Key-Expires"},
		{"a reference that changes between answers", quirkOutcome | quirkSlow | flawRefChanges, conformance.Fail,
			"a reference must stay the same"},
		{"a new key safe on an in-flight 409", quirkOutcome | quirkSlow | flawSafeInFlight, conformance.Fail,
			"a concurrent duplicate's 409 (409) has Idempotency-Safe-New-Key: true with state in-flight"},
		{"a refusal of a malformed key that tells nothing", quirkOutcome | quirkSlow | flawUntoldRefusal, conformance.Fail,
			"the refusal of a malformed key (400) carries no Idempotency-Operation-State"},
		{"a problem whose members disagree with its headers", quirkOutcome | quirkSlow | flawProblemDisagrees, conformance.Fail,
			`the refusal of another body (422): the problem's operation_state "completed", the header "none"`},
		{"a key expiry in the past", quirkOutcome | quirkSlow | flawKeyExpired, conformance.Fail, "not after the answer's own date"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, srv := newFakeAPI(t, tt.flaw, "")
			code, doc := idemcheckJSON(t, append(fakeArgs(srv), "-checks", "outcome")...)
			c, ok := findCheck(doc, "outcome")
			if !assert.True(t, ok, "checks:\n%s", pretty(doc)) {
				return
			}
			assert.Equal(t, tt.verdict, c.Verdict, "checks:\n%s", pretty(doc))
			assert.Contains(t, c.Detail, tt.detail)
			assert.Equal(t, tt.verdict != conformance.Fail, doc.Passed, "only a wrong outcome fails the run")
			assert.Equal(t, map[bool]int{true: exitPass, false: exitFail}[tt.verdict != conformance.Fail], code)
			if tt.verdict == conformance.Fail {
				assert.NotEmpty(t, c.Evidence, "a failure shows its evidence")
			}
		})
	}
}
