package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
)

// A record stored by a node that fingerprinted with sha256-v2 is compared
// with v2: an honest retry replays, even of a body whose names fold
// together, and another body is still refused.
func TestRecordOfFingerprintV2IsComparedWithV2(t *testing.T) {
	k := postgresKit(t)
	mux, p := payServer(t, k, Config{})
	srv := serve(t, mux)
	const body = `{"amount": 1, "AMOUNT": 2}`
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-v2", body).status)
	v2 := sumWith(t, fingerprint.AlgV2, &fingerprint.Input{Method: "POST", Route: "POST /v1/payments", Body: []byte(body)})
	_, err := k.pool.Exec(context.Background(), `UPDATE idem_records SET fp_alg = $1, fingerprint = $2`, fingerprint.AlgV2, v2)
	require.NoError(t, err)
	r := post(t, srv, "/v1/payments", "k-v2", `{"amount":1,"AMOUNT":2}`)
	assert.True(t, r.replayed(), "an honest retry of a v2 record replays: %d %s", r.status, r.body)
	other := post(t, srv, "/v1/payments", "k-v2", `{"amount": 3}`)
	assert.Equal(t, http.StatusUnprocessableEntity, other.status, "v2 is known: another body is refused")
	assert.EqualValues(t, 1, p.runs.Load())
}
