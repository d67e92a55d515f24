package server

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// A claim reads a record with sqlRead, on two paths: pgx's Scan on a pool
// connection ([Leased] claims, the read after a lock wait), and the binary
// values of a [Transactional] claim's own round trip (postgres_wire.go).
// Both read the columns of readColumns into a recordRow through pgx's type
// map: a column is added in one place.

// recordRow is a row of sqlRead, read into one value.
type recordRow struct {
	fpAlg, state string
	fp           []byte
	token        [16]byte
	expired      bool
	leftMicros   *int64 // NULL: no lease
	status       *int   // NULL: running
	header, body []byte
	expiresAt    time.Time
}

// readColumn is a column of sqlRead ($1 scope_hash, $2 clock offset): its
// SQL, its type, and the field of a recordRow that holds it.
type readColumn struct {
	sql   string
	oid   uint32
	field func(r *recordRow) any
}

// readColumns are sqlRead's columns, in order.
var readColumns = []readColumn{
	{"r.fp_alg", pgtype.TextOID, func(r *recordRow) any { return &r.fpAlg }},
	{"r.fingerprint", pgtype.ByteaOID, func(r *recordRow) any { return &r.fp }},
	{"r.state", pgtype.TextOID, func(r *recordRow) any { return &r.state }},
	{"r.token", pgtype.UUIDOID, func(r *recordRow) any { return &r.token }},
	{"r.expires_at <= statement_timestamp() + $2::interval", pgtype.BoolOID, func(r *recordRow) any { return &r.expired }},
	{"(extract(epoch FROM r.locked_until - (statement_timestamp() + $2::interval)) * 1000000)::bigint",
		pgtype.Int8OID, func(r *recordRow) any { return &r.leftMicros }},
	{"r.status", pgtype.Int4OID, func(r *recordRow) any { return &r.status }},
	{"r.headers", pgtype.ByteaOID, func(r *recordRow) any { return &r.header }},
	{"r.body", pgtype.ByteaOID, func(r *recordRow) any { return &r.body }},
	{"r.expires_at", pgtype.TimestamptzOID, func(r *recordRow) any { return &r.expiresAt }},
}

// sqlRead reads a record, no row when there is none, in a plain index
// scan: $1 scope_hash, $2 clock offset. It runs as a statement of its own,
// so that after a lock wait it sees a record that committed meanwhile.
var sqlRead = readSQL()

func readSQL() string {
	cols := make([]string, len(readColumns))
	for i, c := range readColumns {
		cols[i] = c.sql
	}
	return "SELECT " + strings.Join(cols, ",\n    ") + "\nFROM idem_records AS r WHERE r.scope_hash = $1"
}

// targets are r's fields in the order of readColumns.
func (r *recordRow) targets() []any {
	t := make([]any, len(readColumns))
	for i, c := range readColumns {
		t[i] = c.field(r)
	}
	return t
}

// scanFound reads the row of sqlRead through pgx: nil when no record.
func scanFound(row pgx.Row) (*found, error) {
	var r recordRow
	err := row.Scan(r.targets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.found()
}

// decodeRecordRow reads a row of sqlRead in binary format, whose values
// are valid only during the call, with m, the connection's type map.
func decodeRecordRow(m *pgtype.Map, v [][]byte) (recordRow, error) {
	var r recordRow
	if len(v) != len(readColumns) {
		return r, fmt.Errorf("server: a record row of an unexpected shape: %d columns", len(v))
	}
	for i, c := range readColumns {
		if err := m.Scan(c.oid, pgtype.BinaryFormatCode, v[i], c.field(&r)); err != nil {
			return r, fmt.Errorf("server: a record row of an unexpected shape: %s: %w", c.sql, err)
		}
	}
	return r, nil
}

// found is the record of r.
func (r *recordRow) found() (*found, error) {
	f := &found{fpAlg: r.fpAlg, fp: r.fp, state: recordState(r.state), token: uuid.UUID(r.token),
		expired: r.expired, expiresAt: r.expiresAt}
	if r.leftMicros != nil {
		f.leaseLeft = time.Duration(*r.leftMicros) * time.Microsecond
	}
	var err error
	f.resp, err = responseOf(f.state, r.status, r.header, r.body)
	return f, err
}
