package wire

import (
	"net/http"
	"testing"
)

func TestRefusalCode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		want   RPCCode
	}{
		{ProblemKeyMissing, http.StatusBadRequest, CodeInvalidArgument},
		{ProblemKeyReused, http.StatusUnprocessableEntity, CodeFailedPrecondition},
		{ProblemKeyInFlight, http.StatusConflict, CodeAborted},
		// Uncertain is a 409 too, but must not read as ABORTED, which asks
		// for a retry: only an operator's resolution changes its answer.
		{ProblemOutcomeUncertain, http.StatusConflict, CodeFailedPrecondition},
		{"replay-forbidden", http.StatusForbidden, CodePermissionDenied},
		{"deadline-expired", http.StatusGatewayTimeout, CodeDeadlineExceeded},
		{"store-unavailable", http.StatusServiceUnavailable, CodeUnavailable},
		{"some-other", http.StatusConflict, CodeAborted},
		{"some-other", http.StatusTeapot, CodeInvalidArgument},
	} {
		if got := RefusalCode(tc.name, tc.status); got != tc.want {
			t.Errorf("RefusalCode(%q, %d) = %v, want %v", tc.name, tc.status, got, tc.want)
		}
	}
}
