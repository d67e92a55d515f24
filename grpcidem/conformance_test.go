package grpcidem_test

import (
	"testing"

	"github.com/idemkit/idem/internal/adaptertest"
)

// TestConformance runs every check of idemcheck (replay, another body, key
// missing and invalid, concurrent duplicates, scope, faults after commit)
// against the sample payment API served over gRPC by grpc-go behind the
// interceptor, on Postgres, in Transactional and Leased mode. The faults
// check's proxy drops responses after the handler committed.
func TestConformance(t *testing.T) {
	adaptertest.Conformance(t, buildGRPC)
}
