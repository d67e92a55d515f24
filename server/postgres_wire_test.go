package server

import (
	"encoding/binary"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
)

// recordRowValues is a row of sqlRead in binary format: a done record
// with status 201, no lease.
func recordRowValues() [][]byte {
	token := make([]byte, 16)
	token[15] = 7
	return [][]byte{
		[]byte(fingerprint.Alg), []byte("fp"), []byte("done"), token, {0}, nil,
		binary.BigEndian.AppendUint32(nil, 201), []byte("headers"), []byte("body"),
		binary.BigEndian.AppendUint64(nil, 0), // 2000-01-01, the epoch of Postgres
	}
}

func TestDecodeRecordRow(t *testing.T) {
	v := recordRowValues()
	r, err := decodeRecordRow(pgtype.NewMap(), v)
	require.NoError(t, err)
	assert.Equal(t, fingerprint.Alg, r.fpAlg)
	assert.Equal(t, "done", r.state)
	assert.Equal(t, byte(7), r.token[15])
	assert.False(t, r.expired)
	assert.Nil(t, r.leftMicros, "a NULL lease")
	require.NotNil(t, r.status)
	assert.Equal(t, 201, *r.status)

	// The values are valid only during pgconn's row callback: the row must
	// own copies of what it keeps.
	for _, b := range [][]byte{v[1], v[7], v[8]} {
		b[0] = 'X'
	}
	assert.Equal(t, []byte("fp"), r.fp)
	assert.Equal(t, []byte("headers"), r.header)
	assert.Equal(t, []byte("body"), r.body)

	v = recordRowValues()
	v[4], v[5], v[6] = []byte{1}, binary.BigEndian.AppendUint64(nil, uint64(1500000)), nil
	r, err = decodeRecordRow(pgtype.NewMap(), v)
	require.NoError(t, err)
	assert.True(t, r.expired)
	require.NotNil(t, r.leftMicros)
	assert.Equal(t, int64(1500000), *r.leftMicros)
	assert.Nil(t, r.status, "a running record has no status")
}

func TestDecodeRecordRowRefusesAnotherShape(t *testing.T) {
	cases := map[string]func(v [][]byte) [][]byte{
		"a column short":       func(v [][]byte) [][]byte { return v[:8] },
		"a column more":        func(v [][]byte) [][]byte { return append(v, nil) },
		"a short token":        func(v [][]byte) [][]byte { v[3] = v[3][:15]; return v },
		"a NULL expiry":        func(v [][]byte) [][]byte { v[4] = nil; return v },
		"a lease not int8":     func(v [][]byte) [][]byte { v[5] = []byte{0, 0, 0, 1}; return v },
		"a status not int4":    func(v [][]byte) [][]byte { v[6] = make([]byte, 8); return v },
		"a text expired field": func(v [][]byte) [][]byte { v[4] = []byte("true"); return v },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := decodeRecordRow(pgtype.NewMap(), change(recordRowValues()))
			assert.ErrorContains(t, err, "unexpected shape")
		})
	}
}

// BenchmarkDecodeRecordRow is the decoding of a Transactional claim's read
// of a completed record, through the connection's type map.
//
//	go test -run '^$' -bench DecodeRecordRow -benchmem ./server
func BenchmarkDecodeRecordRow(b *testing.B) {
	m, v := pgtype.NewMap(), recordRowValues()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeRecordRow(m, v); err != nil {
			b.Fatal(err)
		}
	}
}
