package outbox

import (
	"testing"

	"github.com/idemkit/idem"
)

// A downstream's 409 outcome-uncertain (the idem client's
// ErrOutcomeUncertain) is delivered again with the same key, never parked:
// the downstream's operator settles it, and a later delivery gets the
// replay or runs afresh (docs/CONTRACT.md §9).
func TestOutcomeUncertainIsRetried(t *testing.T) {
	r := classifyError(&idem.Error{Reason: idem.ErrOutcomeUncertain, Status: 409, MayHaveTakenEffect: true})
	if r.verdict != retry || !r.acted {
		t.Fatalf("classifyError(ErrOutcomeUncertain) = verdict %v, acted %v; want retry, acted", r.verdict, r.acted)
	}
}
