package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river/rivertype"
)

// Stats is what [Outbox.Stats] counts: the outbox's depth and how far
// behind it is, for gauges.
type Stats struct {
	// Pending counts the messages neither delivered nor parked: waiting
	// to be relayed ([StateEnqueued]), due, being delivered, or waiting for
	// their next delivery.
	Pending int
	// OldestPending is the time since the oldest of them was enqueued (by
	// the database's clock for [Outbox]), 0 when none.
	OldestPending time.Duration
	// Parked counts the parked messages, until they are re-driven.
	Parked int
}

// Job states, as River names them: a message pending or parked.
var (
	pendingStates = []string{string(rivertype.JobStateAvailable), string(rivertype.JobStatePending),
		string(rivertype.JobStateRetryable), string(rivertype.JobStateRunning), string(rivertype.JobStateScheduled)}
	parkedStates = []string{string(rivertype.JobStateCancelled), string(rivertype.JobStateDiscarded)}
)

// sqlStats counts the outbox's pending and parked jobs, of all its
// queues, and the age of the oldest pending one, from River's job table
// (%[1]s) through its index on (state, queue): $1 kind, $2 pending
// states, $3 parked states, cast to River's state type (%[2]s) so that
// the index's state column is compared as it is (state::text could not
// use it, and would read every delivered job). It adds the messages waiting to be
// relayed, in the table of enqueued messages (%[3]s), to the pending. A
// job's message was enqueued when its arguments say (see jobArgs), or,
// enqueued before the relay existed, when the job was created.
const sqlStats = `WITH j AS (
    SELECT count(*) FILTER (WHERE state = ANY($2::text[]::%[2]s[])) AS pending,
        min(coalesce((args->>'enqueued_at')::timestamptz, created_at)) FILTER (WHERE state = ANY($2::text[]::%[2]s[])) AS oldest,
        count(*) FILTER (WHERE state = ANY($3::text[]::%[2]s[])) AS parked
    FROM %[1]s WHERE state = ANY(($2::text[] || $3::text[])::%[2]s[]) AND kind = $1
), e AS (SELECT count(*) AS pending, min(enqueued_at) AS oldest FROM %[3]s)
SELECT j.pending + e.pending,
    coalesce(extract(epoch FROM now() - least(j.oldest, e.oldest)), 0)::float8,
    j.parked
FROM j, e`

// Stats counts the pending and parked messages (see [Stats]) in one
// statement over River's job table, which scans the jobs of those states
// (not the delivered ones), and the table of enqueued messages, which
// holds only the messages not yet relayed. ctx governs it.
func (o *Outbox) Stats(ctx context.Context) (Stats, error) {
	table, state := o.tables()
	enqueued, _ := o.enqueuedTables()
	var st Stats
	var oldest float64
	err := o.pool.QueryRow(ctx, fmt.Sprintf(sqlStats, table, state, enqueued), kind, pendingStates, parkedStates).
		Scan(&st.Pending, &oldest, &st.Parked)
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", err)
	}
	st.OldestPending = max(time.Duration(oldest*float64(time.Second)), 0)
	return st, nil
}

// Stats counts the pending and parked messages (see [Stats]); it looks at
// every message, under the outbox's lock.
func (q *Memory) Stats(ctx context.Context) (Stats, error) {
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.s.now()
	var st Stats
	for _, m := range q.msgs {
		switch m.state {
		case memPending, memRunning:
			st.Pending++
			st.OldestPending = max(st.OldestPending, now.Sub(m.enqueuedAt))
		case memParked:
			st.Parked++
		}
	}
	return st, nil
}
