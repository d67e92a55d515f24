package adaptertest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/conformance"
	"github.com/idemkit/idem/server"
)

// body is the conformance run's payment: a distinct intent per operation.
const body = `{"amount_cents": 100, "reference": "conformance-{{n}}-{{uuid}}"}`

// Conformance runs every check of idemcheck against the sample API built
// by build, on Postgres, in Transactional and in Leased mode, and fails t
// unless each required check passes (equivalent-json only informs): every
// adapter carries the whole contract, the outcome headers included.
func Conformance(t *testing.T, build Build) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			a := start(t, build, server.Config{Mode: m.mode})
			tmpl, err := conformance.ParseTemplate(body)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			report, err := conformance.Run(ctx, conformance.Config{
				URL: a.url + "/v1/accounts/conformance/payments", Body: tmpl,
				Header:         http.Header{"Authorization": {"Bearer acme:alice"}, "Content-Type": {"application/json"}},
				Principal2:     http.Header{"Authorization": {"Bearer acme:bob"}},
				ReplayedHeader: "Idempotent-Replayed", KeyRequired: true,
				Effects: conformance.Effects{
					IDField: "payment_id", VerifyURL: a.url + "/v1/payments/{id}",
					CountURL: a.url + "/v1/accounts/conformance", CountField: "payment_count",
				},
				Operations: 12, AttemptTimeout: 500 * time.Millisecond, Seed: 1,
			})
			require.NoError(t, err)
			got := map[string]conformance.Verdict{}
			want := map[string]conformance.Verdict{}
			for _, res := range report.Results {
				got[res.Name] = res.Verdict
				want[res.Name] = conformance.Pass
				if !res.Required {
					want[res.Name] = conformance.Info
				}
			}
			assert.Len(t, got, len(conformance.CheckNames()), "every check ran")
			assert.Equal(t, want, got, "verdicts; report:\n%+v", report.Results)
		})
	}
}
