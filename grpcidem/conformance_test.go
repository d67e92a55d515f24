package grpcidem_test

import (
	"testing"

	"github.com/idemkit/idem/internal/adaptertest"
)

// TestConformance runs every check of idemcheck (replay, another body, key
// missing and invalid, concurrent duplicates, scope, faults after commit)
// against the sample payment API served over gRPC by grpc-go behind the
// interceptor, on Postgres, in Transactional and Leased mode. The faults
// check's proxy drops responses after the handler committed. The outcome
// check (docs/CONTRACT.md §4 and §11: the operation's state, reference,
// safe-new-key flag and key expiry on every answer) passes on the
// answers' header metadata and the refusals' ErrorInfo, which the gateway
// turns into headers and problem members.
func TestConformance(t *testing.T) {
	adaptertest.Conformance(t, buildGRPC)
}
