package outbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// The relay moves committed messages from idem_outbox_enqueued into
// River's queue: in one transaction of its own, it deletes up to
// relayBatch rows, which the delete returns (taken FOR UPDATE SKIP LOCKED,
// so that the relays of several dispatchers take different rows), and
// inserts them as River jobs with InsertManyTx. A relay that dies at any
// point before its commit, its jobs inserted or not, leaves the rows where
// they were, and no job: another relay (or it, restarted) moves them
// again. River's unique key on the message's key keeps a key
// to one job whatever happens: a message enqueued again under a key that
// was relayed already (a re-run operation, after the first one's row was
// moved) is folded into the first job when it is the same message, and
// parked with ReasonKeyConflict when it is not (see insertJobs).
//
// The relay's transaction commits asynchronously (synchronous_commit off
// for it alone): it does not wait for its WAL to reach the disk, or a
// synchronous standby, which took a few milliseconds of every message's
// way to its destination (BENCHMARKS §8). This loses nothing. A crash or a
// failover can lose only the whole transaction (PostgreSQL, "Asynchronous
// Commit": the database is as if it had aborted), which leaves the rows in
// idem_outbox_enqueued, committed by the caller's own synchronous commit,
// to be relayed again. And a job it inserted is acted on only after
// River's fetch, a synchronous commit that comes later in the WAL and so
// makes the relay's durable first; were it not, the message would be sent
// again under the same key, as after a dispatcher killed mid-delivery.
//
// A relay runs when it is woken, by a notification that an enqueue sent
// (see listen), and every Config.PollInterval. An enqueue sends one only
// when no enqueue of its Outbox did in the last wakeEvery, and a
// notification that wakes the relay may come before the commits of the
// messages enqueued just after it: so after a batch that moved rows the
// relay looks again once Config.FetchCooldown has passed since that
// batch's jobs were inserted (for rows committed while it moved these),
// and after a wake or such a batch it looks again every relayRecheck for
// 2 x wakeEvery (watch). A message is then relayed within relayRecheck of
// its commit (and the relay's transaction) when its transaction commits
// within wakeEvery of its Enqueue, or while messages keep coming;
// otherwise (a transaction that sent the notification rolled back, or one
// that committed long after its Enqueue in a lull) within
// Config.PollInterval.
//
// The pace is River's: it fetches at most once per FetchCooldown (River's
// Config), so a batch inserted sooner after the last would not start its
// messages sooner. Paced from the start of a pass instead, or not at all,
// a batch was often fetched only with the next one, a pass or more later
// (River sends the notification that starts a fetch at most once per
// FetchCooldown too, as its source shows, so the second of two batches
// inserted closer than that starts no fetch of its own); only latency
// depends on this, never delivery (BENCHMARKS.md §8).
const (
	relayBatch   = 1000
	relayRecheck = 5 * time.Millisecond
	wakeEvery    = 50 * time.Millisecond
	watch        = 2 * wakeEvery
)

// SQL of the relay's transaction: its commit's mode, and the delete of
// the rows it moves, taken in key order (the table's only index), which
// returns them; a row put back (see decodeTaken). %s is the table.
const (
	sqlRelayAsync = `SET LOCAL synchronous_commit = off`
	sqlRelayTake  = `DELETE FROM %[1]s WHERE key IN
(SELECT key FROM %[1]s ORDER BY key LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING key, id, message, enqueued_at`
	sqlRelayPutBack = `INSERT INTO %s (key, id, message, enqueued_at) VALUES ($1, $2, $3, $4)`
)

// relay moves committed messages into River's queue until ctx is done.
// wake receives a token when a message may have been committed.
func (o *Outbox) relay(ctx context.Context, wake <-chan struct{}) {
	var busy time.Time // the last wake, or batch that moved rows
	for {
		moved, inserted, err := o.relayOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			o.s.Logger.WarnContext(ctx, "outbox: cannot relay messages", "error", err)
		}
		now := time.Now()
		if moved > 0 {
			busy = now
		}
		woken, ok := sleep(ctx, pacedBy(moved, wake), o.s.nextPass(moved, err, now.Sub(inserted), now.Sub(busy)))
		if !ok {
			return
		}
		if woken {
			busy = time.Now()
		}
	}
}

// nextPass is how long a relay waits for its next pass (see above), after
// a pass that moved moved rows, their jobs inserted sinceInsert ago, and
// failed with err, sinceBusy after the last wake or batch that moved rows.
func (s *settings) nextPass(moved int, err error, sinceInsert, sinceBusy time.Duration) time.Duration {
	switch {
	case err != nil:
		return s.PollInterval
	case moved > 0:
		return max(s.FetchCooldown-sinceInsert, 0)
	case sinceBusy < watch:
		return relayRecheck
	}
	return s.PollInterval
}

// pacedBy returns the wake channel that may end the wait after a pass
// that moved moved rows: none after a batch, whose pace a wake does not
// cut short (a token waits in wake for the next wait).
func pacedBy(moved int, wake <-chan struct{}) <-chan struct{} {
	if moved > 0 {
		return nil
	}
	return wake
}

// sleep waits for d, a token of wake, or the end of ctx; it reports
// whether a token came, and whether ctx is still live.
func sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) (woken, live bool) {
	if d <= 0 {
		return false, ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, false
	case <-wake:
		return true, true
	case <-t.C:
		return false, true
	}
}

// relayOnce moves up to relayBatch committed messages into River's queue,
// in one transaction: after its BEGIN, the rows' delete (one round trip
// with the commit's mode), their jobs' insert (River's, which notifies
// River's fetchers), and the commit. It returns how many it moved, and
// when their insert returned. A batch begun finishes when ctx ends,
// within Config.StopTimeout.
func (o *Outbox) relayOnce(ctx context.Context) (moved int, inserted time.Time, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.s.StopTimeout)
	defer cancel()
	err = pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		taken, err := o.take(ctx, tx)
		if err != nil {
			return err
		}
		batch, err := o.decodeTaken(ctx, tx, taken)
		if err != nil || len(batch) == 0 {
			return err
		}
		if err := o.insertJobs(ctx, tx, batch); err != nil {
			return err
		}
		moved, inserted = len(batch), time.Now()
		return nil
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	return moved, inserted, nil
}

// take deletes up to relayBatch rows of the table in tx, which it makes
// commit asynchronously, and returns them in the order of their IDs (the
// order of their Enqueue, within the batch).
func (o *Outbox) take(ctx context.Context, tx pgx.Tx) ([]takenRow, error) {
	table, _ := o.enqueuedTables()
	b := &pgx.Batch{}
	b.Queue(sqlRelayAsync)
	b.Queue(fmt.Sprintf(sqlRelayTake, table), relayBatch)
	br := tx.SendBatch(ctx, b)
	taken, err := collectTaken(br)
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(taken, func(a, b takenRow) int { return cmp.Compare(a.ID, b.ID) })
	return taken, nil
}

// collectTaken reads the results of take's batch: the SET's, then the
// delete's rows.
func collectTaken(br pgx.BatchResults) ([]takenRow, error) {
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[takenRow])
}

// takenRow is a row of sqlRelayTake.
type takenRow struct {
	Key     string
	ID      int64
	Message []byte
	At      time.Time
}

// decodeTaken returns the rows taken as the arguments of their jobs. A
// row whose message does not decode (not one that Enqueue wrote) is
// logged, and put back in the table, in tx.
func (o *Outbox) decodeTaken(ctx context.Context, tx pgx.Tx, taken []takenRow) ([]jobArgs, error) {
	table, _ := o.enqueuedTables()
	batch := make([]jobArgs, 0, len(taken))
	for _, r := range taken {
		m, err := decodeArgs(r.Message)
		if err != nil {
			o.s.Logger.ErrorContext(ctx, "outbox: a message in the table does not decode; it stays there",
				"id", r.ID, "key", r.Key, "error", err)
			if _, err := tx.Exec(ctx, fmt.Sprintf(sqlRelayPutBack, table), r.Key, r.ID, r.Message, r.At); err != nil {
				return nil, err
			}
			continue
		}
		a := toArgs(&m)
		a.Key, a.ID, a.EnqueuedAt = r.Key, r.ID, r.At
		batch = append(batch, a)
	}
	return batch, nil
}

// insertOpts are the River options of the job of a message to dest: the
// queue of its destination (see queueFor), no attempts limit of River's
// own (the outbox parks a message itself), and, when unique, its key
// unique among the jobs of every state.
func (o *Outbox) insertOpts(dest string, unique bool) *river.InsertOpts {
	opts := &river.InsertOpts{Queue: queueFor(dest, o.s.Queues), MaxAttempts: riverMaxAttempts}
	if unique {
		opts.UniqueOpts = river.UniqueOpts{ByArgs: true, ByState: allStates}
	}
	return opts
}

// insertJobs inserts batch as River jobs in tx. A message whose key has a
// job already (a message enqueued again after the first was relayed) is
// folded into it when it is the same, and is inserted without the unique
// key, to be parked, when it is not.
func (o *Outbox) insertJobs(ctx context.Context, tx pgx.Tx, batch []jobArgs) error {
	params := make([]river.InsertManyParams, len(batch))
	for i := range batch {
		params[i] = river.InsertManyParams{Args: batch[i], InsertOpts: o.insertOpts(destinationOf(batch[i].URL), true)}
	}
	res, err := o.client.InsertManyTx(ctx, tx, params)
	if err != nil {
		return err
	}
	var conflicts []river.InsertManyParams
	for _, r := range res {
		if !r.UniqueSkippedAsDuplicate {
			continue
		}
		if c, ok := conflictOf(batch, r.Job.EncodedArgs, r.Job.ID); ok {
			o.s.Logger.WarnContext(ctx, "outbox: a different message was enqueued under a key already used: parking it",
				"id", c.ID, "key", c.Key, "first", c.Conflict)
			conflicts = append(conflicts, river.InsertManyParams{Args: c, InsertOpts: o.insertOpts(destinationOf(c.URL), false)})
		}
	}
	if len(conflicts) > 0 {
		_, err = o.client.InsertManyTx(ctx, tx, conflicts)
	}
	return err
}

// conflictOf finds the message of batch that River found a job for
// already (the job's arguments encoded, and its ID), and returns it marked
// as a conflict when it differs from the job's message; ok is false when
// it is the same message (it is folded into the job).
func conflictOf(batch []jobArgs, encoded []byte, jobID int64) (c jobArgs, ok bool) {
	first, err := decodeJobArgs(encoded)
	if err != nil {
		return jobArgs{}, false
	}
	for _, a := range batch {
		if a.Key != first.Key {
			continue
		}
		m, fm := a.message(), first.message()
		if m.same(&fm) {
			return jobArgs{}, false
		}
		a.Conflict = first.messageID(jobID)
		return a, true
	}
	return jobArgs{}, false
}
