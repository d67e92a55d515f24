package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// queueName is the outbox's River queue before it had Config.Queues (see
// queues.go), and kind its job kind.
const (
	queueName = "idem_outbox"
	kind      = "idem_outbox_message"
	// riverMaxAttempts keeps River from discarding a message by itself:
	// the outbox parks it after Config.MaxAttempts.
	riverMaxAttempts = 30000
)

// allStates makes a key unique among the outbox's messages in every
// state, parked and delivered ones included, until River's cleaner
// deletes a delivered message (24 h after its delivery).
var allStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted,
	rivertype.JobStateDiscarded, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// Outbox is a transactional outbox on Postgres. It has three main methods:
// [Outbox.Enqueue] stores a message in the caller's transaction,
// [Outbox.Run] delivers the committed messages until its context ends, and
// [Outbox.Parked] with [Outbox.Redrive] let an operator see and resend the
// messages it gave up on.
//
// Messages are River jobs (github.com/riverqueue/river) of the queues
// "idem_outbox_00" to "idem_outbox_15" (see [Config.Queues]), in the tables
// that [Migrate] creates. Several processes may Run dispatchers on one
// database: each message is delivered by one dispatcher at a time (see
// [Config.RescueAfter]). An Outbox is safe for concurrent use.
type Outbox struct {
	s      *settings
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	lanes  *lanes          // the share of each queue's workers
	served map[string]bool // the queues River delivers from (see discover)
	waits  sync.Map        // job ID -> time.Duration, the wait decided by the last delivery
	woke   atomic.Int64    // when an enqueue last woke the relays, in Unix ns (see wakeDue)
	// sqlEnqueue and sqlEnqueueNotify are Enqueue's statements, with the
	// names of Config.Schema.
	sqlEnqueue, sqlEnqueueNotify string
	// bg counts the releases running (see release), and bgCtx, set by Run
	// before it starts River, ends them when Run stops.
	bg    sync.WaitGroup
	bgCtx context.Context
}

// New returns an [Outbox] on pool, which must hold the tables of
// [Migrate]. It returns an error when cfg is inconsistent (see
// [Config.RescueAfter]). Messages are enqueued in transactions of pool's
// database; a process that only enqueues never calls [Outbox.Run].
func New(pool *pgxpool.Pool, cfg Config) (*Outbox, error) {
	s, err := newSettings(cfg)
	if err != nil {
		return nil, err
	}
	cc := pool.Config().ConnConfig
	s.where = "pg:" + cc.Host + "/" + cc.Database + "/" + cc.RuntimeParams["search_path"]
	names := s.queueNames()
	o := &Outbox{s: s, pool: pool, lanes: newLanes(s, names), served: map[string]bool{}}
	queues := map[string]river.QueueConfig{}
	for _, name := range names {
		queues[name] = river.QueueConfig{MaxWorkers: s.Workers}
		o.served[name] = true
	}
	table, seq := o.enqueuedTables()
	o.sqlEnqueue = fmt.Sprintf(sqlEnqueue, table, literal(seq))
	o.sqlEnqueueNotify = fmt.Sprintf(sqlEnqueueNotify, table, literal(seq), literal(table))
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{o: o}); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	o.client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:                      queues,
		Workers:                     workers,
		FetchCooldown:               s.FetchCooldown,
		FetchPollInterval:           s.PollInterval,
		JobTimeout:                  s.jobTimeout(),
		RescueStuckJobsAfter:        s.RescueAfter,
		RetryPolicy:                 retryPolicy{o},
		CancelledJobRetentionPeriod: -1, // parked messages stay until re-driven or deleted
		DiscardedJobRetentionPeriod: -1,
		MaxAttempts:                 riverMaxAttempts,
		Logger:                      s.Logger,
		Schema:                      s.Schema,
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return o, nil
}

// Enqueue stores m in tx, to be delivered if and only if tx commits, and
// returns its ID. Inside a handler under [server.Middleware]
// ([server.Transactional] mode), tx is [server.Tx](ctx); any [pgx.Tx] of the
// application's works too. An empty m.Key is derived from the
// [server.Operation] of ctx (see [DeriveKey]), or drawn at random without one.
// It writes one row, in one round trip; a dispatcher's relay moves the row
// into the queue once tx commits (see the package doc, "The queue").
//
// Enqueue is idempotent by key, in two steps. While the first message under a
// key waits to be relayed (within milliseconds of its commit while a
// dispatcher runs), the same message enqueued again (an operation that ran
// again) adds nothing and returns the first one's ID, and a different one
// returns [ErrKeyConflict]: two messages of one operation under one
// [Message.Name] are always refused so. Once the first message is in the
// queue, until 24 h after its delivery and for as long as it is parked, the
// relay settles a message enqueued again under its key: the same message is
// folded into the first, which is delivered once (the ID Enqueue returned for
// it then names nothing; [Outbox.LookupKey] finds the first), and a different
// one is parked unsent with [ReasonKeyConflict], where an operator sees it
// ([Outbox.Redrive] sends it, under that key). Send a parked message again
// with Redrive, not Enqueue. Errors: [ErrNoTx], [ErrInvalidMessage] (wrapped
// with the field at fault; nothing is stored), ErrKeyConflict, and the
// database's. A database error leaves tx aborted, as any failed statement
// does.
func (o *Outbox) Enqueue(ctx context.Context, tx pgx.Tx, m Message) (int64, error) {
	if tx == nil {
		return 0, ErrNoTx
	}
	msg, err := prepare(ctx, m, o.s.keyHeader)
	if err != nil {
		return 0, err
	}
	raw, err := encodeMessage(&msg)
	if err != nil {
		return 0, fmt.Errorf("outbox: enqueue: %w", err)
	}
	// Twice at most: a transaction whose snapshot is older than its
	// statement (REPEATABLE READ) may see the key taken in the table and
	// then neither the row, relayed meanwhile, nor its job.
	for range 2 {
		id, err := o.insert(ctx, tx, msg.Key, raw)
		if !isNoRows(err) {
			return id, wrapEnqueue(err)
		}
		id, found, err := o.sameKey(ctx, tx, &msg)
		if err != nil || found {
			return id, err
		}
	}
	return 0, fmt.Errorf("outbox: enqueue: the message under key %q moved while it was read; try again", msg.Key)
}

func wrapEnqueue(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("outbox: enqueue: %w", err)
}

// insert stores the message raw under key in tx and returns its ID, or
// pgx.ErrNoRows when the key is taken. It wakes the relays (see
// wakeDue).
func (o *Outbox) insert(ctx context.Context, tx pgx.Tx, key string, raw []byte) (int64, error) {
	var id int64
	if !o.wakeDue() {
		err := tx.QueryRow(ctx, o.sqlEnqueue, key, raw).Scan(&id)
		return id, err
	}
	err := tx.QueryRow(ctx, o.sqlEnqueueNotify, key, raw).Scan(&id, nil)
	return id, err
}

// wakeDue reports whether an enqueue should wake the relays: at most one
// per wakeEvery of an Outbox does. A notification goes out when its
// transaction commits, and every transaction that sends one takes a lock
// of the database's for its commit (Postgres keeps notifications in commit
// order), so one per enqueue would cost the payments most of their
// throughput (BENCHMARKS.md §8). A relay woken stays on the watch for the
// messages enqueued beside it (see relay.go).
func (o *Outbox) wakeDue() bool {
	now := o.s.now().UnixNano()
	last := o.woke.Load()
	return now-last >= int64(wakeEvery) && o.woke.CompareAndSwap(last, now)
}

// sameKey looks for the message already enqueued under msg's key, in the
// table or, relayed, in the queue: it returns its ID when it is the same
// message, ErrKeyConflict when it differs, and found false when there is
// none.
func (o *Outbox) sameKey(ctx context.Context, tx pgx.Tx, msg *Message) (id int64, found bool, err error) {
	e, err := o.enqueuedByKey(ctx, tx, msg.Key)
	if err == nil {
		return checkSame(e.id, &e.msg, msg)
	}
	if !isNoRows(err) {
		return 0, false, wrapEnqueue(err)
	}
	res, err := o.client.JobListTx(ctx, tx, byKey(msg.Key).First(1))
	if err != nil || len(res.Jobs) == 0 {
		return 0, false, wrapEnqueue(err)
	}
	job := res.Jobs[0]
	a, err := decodeJobArgs(job.EncodedArgs)
	if err != nil {
		return 0, false, wrapEnqueue(err)
	}
	first := a.message()
	return checkSame(a.messageID(job.ID), &first, msg)
}

// checkSame returns id when msg is the same message as first, under its
// key, and ErrKeyConflict when it is not.
func checkSame(id int64, first, msg *Message) (int64, bool, error) {
	if !first.same(msg) {
		return 0, true, fmt.Errorf("%w: %s (message %d)", ErrKeyConflict, msg.Key, id)
	}
	return id, true, nil
}

// Run delivers committed messages until ctx is done, then stops
// gracefully: it fetches no more messages and waits up to
// [Config.StopTimeout] for the deliveries running, then cancels them (their
// messages are delivered again later, with the same key). It also relays:
// it moves the messages that transactions committed into the queue (see
// the package doc, "The queue"), with one connection of the pool kept to
// listen for them. It returns nil after a stop caused by ctx, or the error
// that kept the dispatcher from starting. Run must not be called again
// while it runs.
func (o *Outbox) Run(ctx context.Context) error {
	bgCtx, stopReleases := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReleases()
	o.bgCtx = bgCtx
	if err := o.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("outbox: start: %w", err)
	}
	var relaying sync.WaitGroup
	wake := make(chan struct{}, 1)
	relaying.Go(func() { o.listen(ctx, wake) })
	relaying.Go(func() { o.relay(ctx, wake) })
	relaying.Go(func() { o.discover(ctx) })
	<-ctx.Done()
	relaying.Wait()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.s.StopTimeout)
	defer cancel()
	err := o.client.Stop(stopCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		hardCtx, cancelHard := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancelHard()
		err = o.client.StopAndCancel(hardCtx)
	}
	stopReleases()
	o.bg.Wait()
	if err != nil {
		return fmt.Errorf("outbox: stop: %w", err)
	}
	return nil
}

// sqlLockWaiting locks the job $1 of River's table (%[1]s) and tells
// whether it waits for its next delivery (in a state of $2, cast to
// River's state type %[2]s), whether it is being delivered, and its
// attempt.
const sqlLockWaiting = `SELECT state = ANY($2::text[]::%[2]s[]), state = 'running', attempt FROM %[1]s WHERE id = $1 FOR UPDATE`

// waitingStates are the states of a message waiting for its next delivery.
var waitingStates = []string{string(rivertype.JobStateAvailable), string(rivertype.JobStateRetryable),
	string(rivertype.JobStateScheduled)}

// releaseRecheck is how often release looks again at a message whose
// refused turn River has not yet recorded as ended.
const releaseRecheck = 20 * time.Millisecond

// release makes the messages ids due at once, in the background (Run
// ends it, and waits for it, when it stops, and gives it 30 s): their
// delivery was refused by the client, and their destination has just
// taken one. River records the end of the refused turn (the message
// waiting for its backoff) after the turn returned, in the background: a
// message still being delivered in that attempt is looked at again until
// River has. A message that is no longer waiting (delivered, parked, or
// being delivered in a later attempt) is left alone; River's JobRetry
// makes the others due, under the row's lock.
func (o *Outbox) release(ids []int64) {
	if len(ids) == 0 {
		return
	}
	o.bg.Go(func() {
		ctx, cancel := context.WithTimeout(o.bgCtx, 30*time.Second)
		defer cancel()
		for _, id := range ids {
			if err := o.releaseOne(ctx, id); err != nil {
				o.s.Logger.DebugContext(ctx, "outbox: cannot release a message", "id", id, "error", err)
				return
			}
		}
	})
}

// releaseOne makes message id due at once when it waits for its next
// delivery, once the turn that refused it has ended (see release).
func (o *Outbox) releaseOne(ctx context.Context, id int64) error {
	table, state := o.tables()
	refused := -1 // the attempt of the refused turn, once seen running
	for {
		running := false
		err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
			var waiting bool
			var attempt int
			err := tx.QueryRow(ctx, fmt.Sprintf(sqlLockWaiting, table, state), id, waitingStates).Scan(&waiting, &running, &attempt)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return nil
			case err != nil:
				return err
			case refused >= 0 && attempt != refused:
				running = false // delivered again since: not the refused turn's
				return nil
			case running:
				refused = attempt
				return nil
			case !waiting:
				return nil
			}
			_, err = o.client.JobRetryTx(ctx, tx, id)
			return err
		})
		if err != nil || !running {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(releaseRecheck):
		}
	}
}

// tables names River's job table and its state type, in Config.Schema
// when it is set.
func (o *Outbox) tables() (table, state string) {
	return o.inSchema("river_job"), o.inSchema("river_job_state")
}

// inSchema is the name of the table, sequence or type name, qualified by
// Config.Schema when it is set.
func (o *Outbox) inSchema(name string) string {
	if o.s.Schema == "" {
		return name
	}
	return pgx.Identifier{o.s.Schema, name}.Sanitize()
}

// retryPolicy is River's retry policy for the outbox's jobs: the wait the
// failed delivery decided (see Config.MinBackoff), or, for a message
// rescued from a dead dispatcher, the backoff of its attempt.
type retryPolicy struct{ o *Outbox }

// The time is River's clock (time.Now), which schedules the retry, not
// the outbox's own (settings.now, which its rules read and tests move).
func (p retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	s := p.o.s
	if w, ok := p.o.waits.LoadAndDelete(job.ID); ok {
		return time.Now().Add(w.(time.Duration))
	}
	n := max(job.Attempt-decodeRecord(job.Metadata).Base, 1)
	return time.Now().Add(backoff(n, s.MinBackoff, s.MaxBackoff, 0, s.random()))
}
