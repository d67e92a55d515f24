package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// Two bodies that differ only in the order of names a case-insensitive
// decoder matches as one field are two requests: the test handler (like
// the example API) reads {"amount":100,"AMOUNT":5000} as 5000 and
// {"AMOUNT":5000,"amount":100} as 100, so the second under the first's key
// gets 422, in either order, instead of a replay of the first's 201
// (issue 22, D2).
func TestNamesThatFoldTogetherInAnotherOrderAreRefused(t *testing.T) {
	lower, upper := `{"amount":100,"AMOUNT":5000}`, `{"AMOUNT":5000,"amount":100}`
	eachStore(t, func(t *testing.T, k *kit) {
		mux, p := payServer(t, k, Config{})
		srv := serve(t, mux)
		for i, order := range [][2]string{{lower, upper}, {upper, lower}} {
			key := []string{"k-fold-1", "k-fold-2"}[i]
			first := post(t, srv, "/v1/payments", key, order[0])
			require.Equal(t, http.StatusCreated, first.status, first.body)
			retry := post(t, srv, "/v1/payments", key, " "+order[0]+"\n")
			assert.True(t, retry.replayed(), "an honest retry of %s replays: %d %s", order[0], retry.status, retry.body)
			other := post(t, srv, "/v1/payments", key, order[1])
			assert.Equal(t, http.StatusUnprocessableEntity, other.status, "%s after %s: %s", order[1], order[0], other.body)
			assert.Equal(t, wire.ProblemKeyReused, problemName(t, other))
		}
		assert.EqualValues(t, 2, p.runs.Load(), "handler runs")
		assert.Equal(t, 2, k.count(t, "pay"), "effects")
	})
}

// A record stored by a node that fingerprinted with sha256-v2 is compared
// with v2: an honest retry replays, even of a body whose names fold
// together, and another body is still refused.
func TestRecordOfFingerprintV2IsComparedWithV2(t *testing.T) {
	k := postgresKit(t)
	mux, p := payServer(t, k, Config{})
	srv := serve(t, mux)
	const body = `{"amount": 1, "AMOUNT": 2}`
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-v2", body).status)
	v2 := fingerprintV2(&fpInput{method: "POST", route: "POST /v1/payments", body: []byte(body)})
	_, err := k.pool.Exec(context.Background(), `UPDATE idem_records SET fp_alg = $1, fingerprint = $2`, fingerprintAlgV2, v2)
	require.NoError(t, err)
	r := post(t, srv, "/v1/payments", "k-v2", `{"amount":1,"AMOUNT":2}`)
	assert.True(t, r.replayed(), "an honest retry of a v2 record replays: %d %s", r.status, r.body)
	other := post(t, srv, "/v1/payments", "k-v2", `{"amount": 3}`)
	assert.Equal(t, http.StatusUnprocessableEntity, other.status, "v2 is known: another body is refused")
	assert.EqualValues(t, 1, p.runs.Load())
}
