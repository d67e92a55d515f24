package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
)

// The record row is read on two paths from one column list (readColumns):
// scanFound, through pgx (Leased claims, the wait after a lock), and
// decodeRecordRow, from the binary values of the claim's own round trip
// (Transactional claims). TestRecordDecodersAgree reads records of every
// shape both ways and requires the same found.
func TestRecordDecodersAgree(t *testing.T) {
	k := postgresKit(t)
	s := k.store.(*PostgresStore)
	ctx := context.Background()
	shapes := map[string]string{
		"done":             `'done', NULL, 201, $3::bytea, 'body'::bytea, now() + interval '1 hour'`,
		"done empty body":  `'done', NULL, 204, NULL, ''::bytea, now() + interval '1 hour'`,
		"done NULL body":   `'done', NULL, 200, NULL, NULL, now() + interval '1 hour'`,
		"running, leased":  `'running', now() + interval '30 seconds', NULL, NULL, NULL, now() + interval '1 hour'`,
		"running, ended":   `'running', now() - interval '30 seconds', NULL, NULL, NULL, now() + interval '1 hour'`,
		"unavailable":      `'unavailable', NULL, NULL, NULL, NULL, now() + interval '1 hour'`,
		"unavailable, 201": `'unavailable', NULL, 201, $3::bytea, NULL, now() + interval '1 hour'`,
		"expired":          `'done', NULL, 201, $3::bytea, 'old'::bytea, now() - interval '1 second'`,
		"stored form":      `'done', NULL, 201, $4::bytea, NULL, now() + interval '1 hour'`,
		"parked":           `'unavailable', NULL, NULL, $5::bytea, NULL, now() + interval '1 hour'`,
	}
	h := http.Header{"Content-Type": {"application/json"}, "X-Two": {"a", "b\xe9"}}
	header := encodeHeader(h)
	stored, _ := (&Response{Status: 201, Header: h, Body: []byte("body")}).MarshalBinary()
	parked, _ := (&Response{Unavailable: true}).MarshalBinary()
	responses := map[string]*Response{}
	for name, values := range shapes {
		c := &Claim{Scope: fingerprint.Scope("", "", "POST /x", name), Key: name}
		_, err := k.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO idem_records (scope_hash, tenant, principal, route, idem_key,
    fp_alg, fingerprint, token, attempt, created_at, state, locked_until, status, headers, body, expires_at)
SELECT $1, '', '', 'POST /x', $2, 'sha256-v3', 'fp'::bytea, gen_random_uuid(), 1, now(), %s
WHERE $3::bytea IS NOT NULL AND $4::bytea IS NOT NULL AND $5::bytea IS NOT NULL`, values), c.Scope[:], name, header, stored, parked)
		require.NoError(t, err, name)

		viaPgx, err := s.read(ctx, k.pool, c)
		require.NoError(t, err, name)
		viaWire := readOnTheWire(t, s, k.pool, c)
		require.NotNil(t, viaPgx, name)
		require.NotNil(t, viaWire, name)
		assert.InDelta(t, viaPgx.leaseLeft, viaWire.leaseLeft, float64(time.Second), name)
		viaPgx.leaseLeft, viaWire.leaseLeft = 0, 0 // read at two instants
		assert.Equal(t, viaPgx, viaWire, name)
		responses[name] = viaPgx.resp
	}
	// Records of the form before the stored one (the header block, the body
	// in its column) read as those of the stored form.
	want := &Response{Status: 201, Header: h, Body: []byte("body")}
	assert.Equal(t, want, responses["done"])
	assert.Equal(t, want, responses["stored form"])
	assert.Equal(t, &Response{Unavailable: true, Status: 201, Header: h}, responses["unavailable, 201"])
	assert.Equal(t, &Response{Unavailable: true, Header: http.Header{}}, responses["parked"])
	assert.Nil(t, responses["unavailable"], "a parked record of an earlier version has no response")
	missing := &Claim{Scope: fingerprint.Scope("", "", "POST /x", "none")}
	f, err := s.read(ctx, k.pool, missing)
	require.NoError(t, err)
	assert.Nil(t, f)
	assert.Nil(t, readOnTheWire(t, s, k.pool, missing))
}

// readOnTheWire reads c's record as a Transactional claim does: sqlRead
// prepared by name, binary values, decodeRecordRow.
func readOnTheWire(t *testing.T, s *PostgresStore, pool *pgxpool.Pool, c *Claim) *found {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	defer conn.Release()
	b := newWireBatch(conn.Conn())
	var f *found
	require.NoError(t, b.queue(context.Background(), wireRead, newWireParams(2).bytes(c.Scope[:]).interval(s.offset()),
		func(v [][]byte) error {
			r, err := decodeRecordRow(conn.Conn().TypeMap(), v)
			if err == nil {
				f, err = r.found()
			}
			return err
		}))
	_, err = b.send(context.Background())
	require.NoError(t, err)
	return f
}
