package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
)

// memClaim claims key on m in mode, with retention, and requires a claim.
func memClaim(t *testing.T, m *MemoryStore, key string, mode Mode, retention time.Duration) Attempt {
	t.Helper()
	c := &Claim{Scope: fingerprint.Scope("t", "p", "r", key), Tenant: "t", Principal: "p", Route: "r", Key: key,
		Digest: []byte{1}, DigestAlg: fingerprint.Alg, Mode: mode, Lease: time.Minute, Retention: retention}
	res, err := m.Claim(context.Background(), c)
	require.NoError(t, err)
	require.Equal(t, VerdictClaimed, res.Verdict, "claim of %s", key)
	return res.Attempt
}

// An insert sweeps the records whose retention has passed, and none
// before then.
func TestMemoryInsertSweepsExpired(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	m := NewMemoryStore()
	m.now = func() time.Time { return now }
	for _, key := range []string{"a", "b", "c"} {
		require.NoError(t, memClaim(t, m, key, Transactional, time.Hour).Complete(context.Background(), &Response{Status: 200}))
	}
	now = now.Add(59 * time.Minute)
	memClaim(t, m, "d", Transactional, 24*time.Hour)
	require.Len(t, m.recs, 4, "no record has expired yet")
	now = now.Add(time.Minute)
	memClaim(t, m, "e", Transactional, 24*time.Hour)
	require.Len(t, m.recs, 2, "the insert swept the three expired records")
}

// A record that Resolve makes expire at once (not applied) is swept by
// the next insert, though every other record expires later.
func TestMemoryInsertSweepsResolvedNotApplied(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	m := NewMemoryStore()
	m.now = func() time.Time { return now }
	memClaim(t, m, "other", Transactional, 24*time.Hour)
	att := memClaim(t, m, "u", Leased, 24*time.Hour)
	require.NoError(t, att.(*leasedAttempt).fence.(UncertainSettler).Uncertain(context.Background()))
	_, err := m.Resolve(context.Background(), Operation{Tenant: "t", Principal: "p", Route: "r", Key: "u"},
		Resolution{By: "ops", Reason: "no charge"})
	require.NoError(t, err)
	now = now.Add(time.Second)
	memClaim(t, m, "next", Transactional, 24*time.Hour)
	require.Len(t, m.recs, 2, "the insert swept the record resolved as not applied")
}
