package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// A message is enqueued in the caller's transaction as one narrow row of
// idem_outbox_enqueued: its key (the primary key, and the table's only
// index), its ID, the message as JSON and the time of its enqueue. A
// relay, run by every dispatcher (see relay.go), moves committed rows into
// River's queue in batches. River's job insert, with its seven indexes,
// costs the request's throughput several times what this row does
// (BENCHMARKS.md §8).
//
// A message's ID is drawn from River's own job ID sequence, so that it
// never equals the ID of another message or of a job: River gives the job
// that carries a relayed message an ID of its own, and the message's ID
// rides in the job's arguments (jobArgs.ID); a job enqueued before the
// relay existed has none, and its job ID is its message's ID.

// sqlCreateEnqueued creates the table of enqueued messages (see above).
// Its key collates as "C": keys are printable ASCII, compared bytewise.
const sqlCreateEnqueued = `CREATE TABLE IF NOT EXISTS idem_outbox_enqueued (
    key text COLLATE "C" PRIMARY KEY,
    id bigint NOT NULL,
    message jsonb NOT NULL,
    enqueued_at timestamptz NOT NULL DEFAULT statement_timestamp()
)`

// sqlEnqueue stores a message unless its key is already enqueued: $1 key,
// $2 the message's JSON; %[1]s is the table, %[2]s River's job ID
// sequence as a literal. sqlEnqueueNotify does the same and wakes the
// relays, on the channel of the table (%[3]s, the table as a literal).
const (
	sqlEnqueue = `INSERT INTO %[1]s (key, id, message) VALUES ($1, nextval(%[2]s), $2)
ON CONFLICT (key) DO NOTHING RETURNING id`
	sqlEnqueueNotify = `WITH m AS (` + sqlEnqueue + `)
SELECT id, pg_notify('idem_outbox_' || %[3]s::regclass::oid, '')::text FROM m`
)

// sqlChannel names the channel the relays listen on: one per table, by
// its OID (%s, the table as a literal), as sqlEnqueueNotify names it.
const sqlChannel = `SELECT 'idem_outbox_' || %s::regclass::oid`

// literal quotes s as an SQL string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Statements of the Lookup family on the table: the message of a key, and
// of an ID (no index covers the ID: the table holds only the messages not
// yet relayed).
const (
	sqlEnqueuedByKey = `SELECT id, message, enqueued_at FROM %s WHERE key = $1`
	sqlEnqueuedByID  = `SELECT id, message, enqueued_at FROM %s WHERE id = $1`
)

// enqueuedTables names the table of enqueued messages and River's job ID
// sequence, in Config.Schema when it is set.
func (o *Outbox) enqueuedTables() (table, seq string) {
	return o.inSchema("idem_outbox_enqueued"), o.inSchema("river_job_id_seq")
}

// enqueued is a row of the table: a message not yet relayed.
type enqueued struct {
	id  int64
	msg Message
	at  time.Time
}

// encodeMessage is m as the table stores it.
func encodeMessage(m *Message) ([]byte, error) {
	return json.Marshal(toArgs(m))
}

// scanEnqueued reads a row of sqlEnqueuedByKey or sqlEnqueuedByID;
// pgx.ErrNoRows when there is none.
func scanEnqueued(row pgx.Row) (enqueued, error) {
	var e enqueued
	var raw []byte
	if err := row.Scan(&e.id, &raw, &e.at); err != nil {
		return enqueued{}, err
	}
	var err error
	e.msg, err = decodeArgs(raw)
	return e, err
}

// enqueuedByKey returns the message of key still in the table, or
// pgx.ErrNoRows. q is the caller's transaction or the pool.
func (o *Outbox) enqueuedByKey(ctx context.Context, q querier, key string) (enqueued, error) {
	table, _ := o.enqueuedTables()
	return scanEnqueued(q.QueryRow(ctx, fmt.Sprintf(sqlEnqueuedByKey, table), key))
}

// enqueuedByID returns the message id still in the table, or
// pgx.ErrNoRows.
func (o *Outbox) enqueuedByID(ctx context.Context, id int64) (enqueued, error) {
	table, _ := o.enqueuedTables()
	return scanEnqueued(o.pool.QueryRow(ctx, fmt.Sprintf(sqlEnqueuedByID, table), id))
}

// querier is a transaction or a pool.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// status is the status of a message still in the table.
func (e enqueued) status() MessageStatus {
	return MessageStatus{State: StateEnqueued, ParkedMessage: ParkedMessage{ID: e.id, Message: e.msg, EnqueuedAt: e.at.UTC()}}
}

// byKey lists the outbox's jobs whose message has key, oldest first (by
// containment in the jobs' arguments, which River indexes), in any of its
// queues.
func byKey(key string) *river.JobListParams {
	return river.NewJobListParams().Kinds(kind).
		Where("args @> jsonb_build_object('key', @key::text)", river.NamedArgs{"key": key})
}

// byID lists the outbox's job of the message id: the job whose arguments
// carry id, or, enqueued before the relay existed, the job id.
func byID(id int64) *river.JobListParams {
	return river.NewJobListParams().Kinds(kind).
		Where("(args @> jsonb_build_object('id', @id::bigint) OR (id = @id AND args->'id' IS NULL))",
			river.NamedArgs{"id": id})
}

// isNoRows reports whether err says that a query found no row.
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
