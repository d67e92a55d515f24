package storetest

import (
	"context"
	"crypto/sha256"
	"strconv"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// The store-level tests claim keys of one route, with digests of an
// algorithm of the suite's own: the middleware's algorithm is its
// business, and a store must only keep the two together.
const (
	chargesRoute = "POST /v1/charges"
	digestAlg    = "storetest-v1"
)

// leasedClaim is a Leased claim of key on chargesRoute with the given
// lease and retention (which Middleware may refuse: the records of an
// older version, or written by hand, may have them) and request digest.
func leasedClaim(key string, lease, retention time.Duration, digest byte) *server.Claim {
	return &server.Claim{
		Scope: sha256.Sum256([]byte("storetest\x00" + chargesRoute + "\x00" + key)), Tenant: "acme", Principal: "alice",
		Route: chargesRoute, Key: key, Digest: []byte{digest, 1, 2, 3}, DigestAlg: digestAlg,
		Mode: server.Leased, Lease: lease, Retention: retention, Wait: time.Second, Request: []byte("request of " + key),
	}
}

// claim runs c on e's store.
func (e *env) claim(c *server.Claim) server.ClaimResult {
	e.t.Helper()
	res, err := e.store.Claim(context.Background(), c)
	require.NoError(e.t, err, "Claim %s", c.Key)
	return res
}

// claimed runs c, which must win, and returns its Leased attempt.
func (e *env) claimed(c *server.Claim) server.LeasedAttempt {
	e.t.Helper()
	res := e.claim(c)
	require.Equal(e.t, server.VerdictClaimed, res.Verdict, "Claim %s", c.Key)
	att, ok := res.Attempt.(server.LeasedAttempt)
	require.True(e.t, ok, "a Leased claim's Attempt is a %T, not a server.LeasedAttempt", res.Attempt)
	return att
}

// abandon makes n abandoned operations of chargesRoute, keys prefix0 ..,
// each with the recovery point "charged": claimed, then failed.
func (e *env) abandon(prefix string, n int) {
	e.t.Helper()
	ctx := context.Background()
	for i := range n {
		att := e.claimed(leasedClaim(prefix+strconv.Itoa(i), 30*time.Second, time.Hour, 1))
		require.NoError(e.t, att.Checkpoint(ctx, "charged", []byte(`{"charge":"ch_1"}`)))
		require.NoError(e.t, att.Abort(ctx, false))
	}
}

func created(body string) *server.Response {
	return &server.Response{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(body)}
}
