package server

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
)

// churnQuerier answers a Leased claim's statements as a record that keeps
// vanishing and coming back would: every sqlRead finds no record, and each
// sqlInsert inserts or not as inserts says, in turn.
type churnQuerier struct {
	inserts []bool
	sent    []string
}

func (q *churnQuerier) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	switch sql {
	case sqlInsert:
		q.sent = append(q.sent, "insert")
		won := q.inserts[0]
		q.inserts = q.inserts[1:]
		return scannedRow{won: won}
	case sqlRead:
		q.sent = append(q.sent, "read")
		return scannedRow{}
	}
	panic("unexpected statement: " + sql)
}

// scannedRow is sqlInsert's RETURNING true when won, else no row.
type scannedRow struct{ won bool }

func (r scannedRow) Scan(dest ...any) error {
	if !r.won {
		return pgx.ErrNoRows
	}
	*dest[0].(*bool) = true
	return nil
}

// TestSettleWinsWithItsLastRoundsInsert: a claim whose insert in its last
// round took the key owns it. It used to return errClaimContention (503
// store-unavailable) with the record inserted under its token, a lease
// that nobody held: retries got 409 until it ended, and then a reconciler
// took over an operation that never ran. The model's claimLeased
// (internal/model/idem.pml) returns claimed there, as the code now does.
func TestSettleWinsWithItsLastRoundsInsert(t *testing.T) {
	q := &churnQuerier{inserts: []bool{false, false, false, true}}
	c := &Claim{Mode: Leased, Digest: []byte{1}, DigestAlg: fingerprint.Alg}
	res, g, err := (&PostgresStore{}).settle(context.Background(), q, c, [16]byte{1}, false)
	require.NoError(t, err, "statements sent: %v", q.sent)
	require.Equal(t, VerdictClaimed, res.Verdict)
	require.Equal(t, 1, g.attempt)
	require.Len(t, q.sent, 2*maxClaimRounds, "one read and one insert per round")
}

// TestSettleGivesUpWhenTheRecordKeepsChanging: after maxClaimRounds
// rounds that neither won nor found a record to judge, the claim reports
// contention and owns nothing.
func TestSettleGivesUpWhenTheRecordKeepsChanging(t *testing.T) {
	q := &churnQuerier{inserts: []bool{false, false, false, false}}
	c := &Claim{Mode: Leased, Digest: []byte{1}, DigestAlg: fingerprint.Alg}
	_, _, err := (&PostgresStore{}).settle(context.Background(), q, c, [16]byte{1}, false)
	require.True(t, errors.Is(err, errClaimContention), "err = %v", err)
}
