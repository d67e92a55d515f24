package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The round trips that every Transactional request makes (the claim, and
// the stored response with the commit) go straight through pgconn: named
// prepared statements, parameters encoded here in Postgres's binary format,
// one pgconn.Batch per round trip. pgx's own batches do the same on the
// wire, with a pipeline, argument encoding through its type map and a
// result queue per statement, which cost some 30 µs more Go CPU per request
// (BENCHMARKS.md §2).

// wireStmt is a statement that the store prepares by name on each
// connection it uses, once (connState).
type wireStmt struct {
	name, sql string
}

// newWireStmt names sql after its digest, so that a statement whose text
// changes (a new version of this package on a long-lived connection) gets a
// name of its own.
func newWireStmt(sql string) wireStmt {
	digest := sha256.Sum256([]byte(sql))
	return wireStmt{name: "idem_" + hex.EncodeToString(digest[:8]), sql: sql}
}

var (
	wireBegin      = newWireStmt("begin")
	wireTryLock    = newWireStmt(sqlTryLock)
	wireRead       = newWireStmt(sqlRead)
	wireInsertDone = newWireStmt(sqlInsertDone)
	wireComplete   = newWireStmt(sqlCompleteTx)
	wireCommit     = newWireStmt("commit")
)

// connState is what the store keeps on a connection, in its pgconn
// CustomData: the statements it prepared there. A statement that went
// stale closes the connection (staleStatement), and the state goes with
// it.
type connState struct {
	prepared map[string]*pgconn.StatementDescription // by wireStmt name
}

// connStateKey is the key of a connection's connState in its CustomData.
const connStateKey = "github.com/idemkit/idem/server.conn"

// stateOf returns conn's connState, made on first use.
func stateOf(conn *pgx.Conn) *connState {
	data := conn.PgConn().CustomData()
	st, _ := data[connStateKey].(*connState)
	if st == nil {
		st = &connState{prepared: map[string]*pgconn.StatementDescription{}}
		data[connStateKey] = st
	}
	return st
}

// wireBatch is one round trip of prepared statements with binary
// parameters and results.
type wireBatch struct {
	conn  *pgx.Conn
	state *connState
	batch pgconn.Batch
	rows  []func(values [][]byte) error // per statement: takes its rows, or nil
}

func newWireBatch(conn *pgx.Conn) *wireBatch { return &wireBatch{conn: conn, state: stateOf(conn)} }

// binaryFormat is the format code of every parameter and result column:
// all binary.
var binaryFormat = []int16{1}

// queue adds st, preparing it on the connection the first time; onRow,
// when not nil, takes each row it returns (values are valid only during
// the call). A statement is prepared through pgx (a round trip of its own,
// seen by a pool's PrepareTracer) once per connection.
func (b *wireBatch) queue(ctx context.Context, st wireStmt, params *wireParams, onRow func(values [][]byte) error) error {
	sd := b.state.prepared[st.name]
	if sd == nil {
		var err error
		if sd, err = b.conn.Prepare(ctx, st.name, st.sql); err != nil {
			return fmt.Errorf("prepare %s: %w", st.name, err)
		}
		b.state.prepared[st.name] = sd
	}
	var values [][]byte
	if params != nil {
		values = params.values
	}
	var results []int16
	if len(sd.Fields) > 0 {
		results = binaryFormat
	}
	b.batch.ExecStatement(sd, values, binaryFormat, results)
	b.rows = append(b.rows, onRow)
	return nil
}

// send runs the batch and returns each statement's command tag. The first
// error ends it: Postgres skips the rest of the batch.
func (b *wireBatch) send(ctx context.Context) ([]pgconn.CommandTag, error) {
	mrr := b.conn.PgConn().ExecBatch(ctx, &b.batch)
	tags := make([]pgconn.CommandTag, 0, len(b.rows))
	var err error
	for i := 0; mrr.NextResult(); i++ {
		rr := mrr.ResultReader()
		for rr.NextRow() {
			if err == nil && i < len(b.rows) && b.rows[i] != nil {
				err = b.rows[i](rr.Values())
			}
		}
		tag, rerr := rr.Close()
		if err == nil {
			err = rerr
		}
		tags = append(tags, tag)
	}
	if cerr := mrr.Close(); err == nil {
		err = cerr
	}
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && staleStatement(pgErr.Code) {
		// The pool replaces a closed connection, and its successor prepares
		// afresh (pgx's own statement cache invalidates for these errors).
		_ = b.conn.Close(ctx)
	}
	if err == nil && len(tags) != len(b.rows) {
		err = fmt.Errorf("%d results for %d statements", len(tags), len(b.rows))
	}
	return tags, err
}

// staleStatement reports the errors after which a connection's prepared
// statements fail on every use: 0A000, "cached plan must not change result
// type" (a migration changed what a statement returns), and 26000, "prepared
// statement does not exist" (DEALLOCATE or DISCARD ALL ran on the
// connection, behind pgx's back).
func staleStatement(code string) bool { return code == "0A000" || code == "26000" }

// wireParams are a statement's parameters in Postgres's binary format, in
// order; a nil value is NULL. Fixed-size values and strings are copied into
// one buffer, so that a statement's parameters cost two allocations.
type wireParams struct {
	values [][]byte
	buf    []byte
}

// wireParamsBuffer is the buffer's first capacity: room for the record's
// scope names and fixed-size values.
const wireParamsBuffer = 256

func newWireParams(n int) *wireParams {
	return &wireParams{values: make([][]byte, 0, n), buf: make([]byte, 0, wireParamsBuffer)}
}

// add appends the value that the buffer gained since start. Values taken
// before the buffer grew keep the array they point to.
func (p *wireParams) add(start int) *wireParams {
	p.values = append(p.values, p.buf[start:len(p.buf):len(p.buf)])
	return p
}

// bytes is a bytea parameter (nil is NULL), passed without a copy.
func (p *wireParams) bytes(b []byte) *wireParams {
	p.values = append(p.values, b)
	return p
}

// text is a text parameter: its binary form is its bytes.
func (p *wireParams) text(s string) *wireParams {
	start := len(p.buf)
	p.buf = append(p.buf, s...)
	return p.add(start)
}

// int4 is an integer parameter.
func (p *wireParams) int4(v int) *wireParams {
	start := len(p.buf)
	p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(int32(v)))
	return p.add(start)
}

// uuid is a uuid parameter.
func (p *wireParams) uuid(u [16]byte) *wireParams {
	start := len(p.buf)
	p.buf = append(p.buf, u[:]...)
	return p.add(start)
}

// response is the response's columns: state, status (NULL for none) and
// headers (responseValues).
func (p *wireParams) response(res *Response) *wireParams {
	state, status, headers := responseValues(res)
	p.text(state)
	if status == nil {
		p.bytes(nil)
	} else {
		p.int4(*status)
	}
	return p.bytes(headers)
}

// insertDoneParams are sqlInsertDone's parameters: the record of c,
// claimed under token, at the clock offset, storing res.
func insertDoneParams(c *Claim, token uuid.UUID, offset time.Duration, res *Response) *wireParams {
	return newWireParams(13).bytes(c.Scope[:]).text(c.Tenant).text(c.Principal).text(c.Route).text(c.Key).
		text(c.DigestAlg).bytes(c.Digest).uuid(token).interval(offset).interval(c.Retention).response(res)
}

// interval is an interval parameter of d in microseconds (then zero days
// and months), as pgx encodes a time.Duration.
func (p *wireParams) interval(d time.Duration) *wireParams {
	start := len(p.buf)
	p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(d.Microseconds()))
	p.buf = append(p.buf, 0, 0, 0, 0, 0, 0, 0, 0)
	return p.add(start)
}
