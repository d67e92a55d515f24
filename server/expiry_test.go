package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
)

// The tests of this file hold a record's retention and its lease apart: a
// record whose lease is live is never expired, and a takeover or an
// Extend keeps the record alive past the lease, so that a retry after the
// lease ended takes the operation over with its recovery point instead of
// running it afresh beside (or after) the attempt that may have acted.

func TestLeasedConfigNeedsRetentionOfTwoLeases(t *testing.T) {
	assert.PanicsWithValue(t, "server: Config.Retention (1s) must be at least twice Config.Lease (10s) in Leased mode: "+
		"a retry after a lease ended must still find the record and its recovery point", func() {
		Middleware(nil, Config{Mode: Leased, Lease: 10 * time.Second, Retention: time.Second})
	})
	assert.Panics(t, func() { Middleware(nil, Config{Mode: Leased, Lease: time.Hour, Retention: time.Hour}) })
	assert.Panics(t, func() { Middleware(nil, Config{Mode: Leased, Lease: 13 * time.Hour}) }, "the default retention, 24 h")
	assert.NotPanics(t, func() { Middleware(nil, Config{Mode: Leased, Lease: 10 * time.Second, Retention: 20 * time.Second}) })
	assert.NotPanics(t, func() { Middleware(nil, Config{Lease: 10 * time.Second, Retention: time.Second}) },
		"a Transactional route has no lease")
}

// leasedClaim claims key in Leased mode at the store level, with a lease
// and a retention that Middleware would refuse: the records of an older
// version, or written by hand, may have them.
func leasedClaim(t *testing.T, k *kit, key string, lease, retention time.Duration) ClaimResult {
	t.Helper()
	in := &fingerprint.Input{Method: http.MethodPost, Route: "POST /v1/charges", Body: []byte("{}")}
	r := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader("{}"))
	r.Pattern = in.Route
	c := &Claim{Scope: fingerprint.Scope("", "", in.Route, key), Route: in.Route, Key: key, Digest: fingerprint.Sum(in), DigestAlg: fingerprint.Alg,
		in: in, Mode: Leased, Lease: lease, Retention: retention, Wait: time.Second, Request: encodeRequest(r, nil, in.Body)}
	res, err := k.store.Claim(context.Background(), c)
	require.NoError(t, err)
	return res
}
