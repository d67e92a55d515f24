package tour

import (
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idem/testserver"
)

// GuideSeededFaults is docs/testing.md's seeded rule: a tenth of the POSTs
// lose their response after the handler ran, one in twenty gets a 503
// with Retry-After, the same ones again for the same seed.
func GuideSeededFaults(t *testing.T, payments http.Handler) {
	srv := testserver.New(payments, testserver.Config{
		Seed: testserver.Seed(t), // logged; rerun with IDEM_SEED=...
		Rules: []testserver.Rule{{
			Match: testserver.Match{Method: "POST"},
			Mix: []testserver.Chance{{P: 0.1, Fault: testserver.Fault{Kind: testserver.FaultDropReset}},
				{P: 0.05, Fault: testserver.Fault{Kind: testserver.FaultStatus, RetryAfter: time.Second}}},
		}},
	})
	defer srv.Close()
}
