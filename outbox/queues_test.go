package outbox

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// apart returns a healthy downstream whose destination is in another of
// n queues than url's.
func apart(t *testing.T, url string, n int) *downstream {
	t.Helper()
	for range 100 {
		d := newDownstream(t, nil)
		if queueFor(destinationOf(d.srv.URL), n) != queueFor(destinationOf(url), n) {
			return d
		}
	}
	t.Fatal("no port in another queue in 100 tries")
	return nil
}

// queueCounts returns, for the jobs of queue, how many are running and
// how many were ever fetched (an attempt made).
func queueCounts(t *testing.T, pool *pgxpool.Pool, queue string) (running, fetched int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE state = 'running'),
count(*) FILTER (WHERE attempt > 0) FROM river_job WHERE queue = $1`, queue).Scan(&running, &fetched))
	return running, fetched
}

// Messages to a healthy host are delivered while every worker of the
// queue of a host that hangs is held, even with one worker a queue: the
// relay puts each message in the queue of its destination, and each
// queue fetches on its own (issue 28 defect 1: one queue for all, whose
// FIFO order put the healthy messages behind the hanging ones).
func TestADestinationHoldsUpOnlyItsQueue(t *testing.T) {
	cfg := fastConfig(&events{})
	cfg.Workers, cfg.Timeout, cfg.RescueAfter = 1, time.Minute, 2*time.Minute
	_, o, pool := postgresTarget(t, cfg)
	slow, held := hanging(t)
	healthy := apart(t, slow.URL, o.s.Queues)
	for i := range 5 {
		_, err := enqueueIn(t, o, Message{Name: "slow", Method: "POST", URL: slow.URL, Key: "slow-" + strconv.Itoa(i)})
		require.NoError(t, err)
	}
	running(t, o.Run)
	eventually(t, func() bool { return held.Load() == 1 }, "the hanging host holds the one worker of its queue")
	for i := range 10 {
		m := healthy.message("ok")
		m.Key = "ok-" + strconv.Itoa(i)
		_, err := enqueueIn(t, o, m)
		require.NoError(t, err)
	}
	eventually(t, func() bool { return len(healthy.keys()) == 10 }, "the healthy host's messages are delivered")
	assert.Equal(t, int64(1), held.Load(), "requests held by the hanging host")
	inSlow, _ := queueCounts(t, pool, queueFor(destinationOf(slow.URL), o.s.Queues))
	assert.Equal(t, 1, inSlow, "running in the hanging host's queue")
}

// A dead destination alone in its queue is fetched at its pace: the turns
// its client refuses (breaker open) hold the queue's workers until their
// place in the dispatcher's pace, and the queue fetches no more of its
// messages meanwhile, so that they cost no row update while they wait
// (issue 26: each was fetched and snoozed at once, 4,000 row updates for
// 2,000 messages in the first seconds). Here every place is an hour away:
// the turns hold until their deadline, which the test does not reach,
// while messages to another host are delivered.
func TestADeadDestinationIsFetchedAtItsPace(t *testing.T) {
	cfg := fastConfig(&events{})
	cfg.Workers, cfg.Timeout, cfg.RescueAfter = 3, 30*time.Second, time.Minute
	cfg.Client.Breaker = idem.BreakerConfig{ConsecutiveFailures: 1, OpenTimeout: time.Hour}
	_, o, pool := postgresTarget(t, cfg)
	now := time.Now().Unix()
	for sec := range int64(7200) {
		o.s.refusals.due[now+sec] = refusalRate
	}
	dead := newDownstream(t, func(string, int) (int, http.Header, string) {
		return http.StatusServiceUnavailable, nil, "down"
	})
	healthy := apart(t, dead.srv.URL, o.s.Queues)
	for i := range 50 {
		m := dead.message("event")
		m.Key = "dead-" + strconv.Itoa(i)
		_, err := enqueueIn(t, o, m)
		require.NoError(t, err)
	}
	running(t, o.Run)
	queue := queueFor(destinationOf(dead.srv.URL), o.s.Queues)
	eventually(t, func() bool { n, _ := queueCounts(t, pool, queue); return n == 3 }, "three turns hold the dead queue's workers")
	for i := range 5 {
		m := healthy.message("ok")
		m.Key = "ok-" + strconv.Itoa(i)
		_, err := enqueueIn(t, o, m)
		require.NoError(t, err)
	}
	eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(),
			"SELECT count(*) FROM river_job WHERE state = 'completed' AND args->>'key' LIKE 'ok-%'").Scan(&n))
		return n == 5
	}, "the other host's messages are delivered, and River has recorded it")
	inDead, fetched := queueCounts(t, pool, queue)
	assert.Equal(t, 3, inDead, "turns holding the dead queue's workers")
	assert.LessOrEqual(t, fetched, 6, "messages of the dead host fetched (of 50): the three held, and those sent before the breaker opened")
	assert.LessOrEqual(t, len(dead.keys()), 3, "requests that reached the dead host: those sent before the breaker opened")
}

// A dispatcher serves the outbox's queues that River lists beyond its own
// Config.Queues (those of a dispatcher with more, or of an earlier
// Config.Queues), so that changing Config.Queues strands no message.
func TestADispatcherServesTheQueuesOfAnotherConfig(t *testing.T) {
	ctx := context.Background()
	cfg := fastConfig(&events{})
	cfg.Queues = 50
	_, wide, pool := postgresTarget(t, cfg)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- wide.Run(runCtx) }()
	eventually(t, func() bool {
		res, err := wide.client.QueueList(ctx, river.NewQueueListParams().First(100))
		return err == nil && len(res.Queues) == 51
	}, "the wide dispatcher's queues are listed")
	stop()
	require.NoError(t, <-done)

	d := newDownstream(t, nil)
	m := d.message("event")
	m.Key = "in-queue-40"
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := wide.client.InsertTx(ctx, tx, toArgs(&m), &river.InsertOpts{Queue: "idem_outbox_40", MaxAttempts: riverMaxAttempts})
		return err
	}))
	narrow, err := New(pool, fastConfig(&events{}))
	require.NoError(t, err)
	require.Equal(t, 4, narrow.s.Queues)
	running(t, narrow.Run)
	eventually(t, func() bool { return d.requests("in-queue-40") == 1 }, "the message in queue 40 is delivered")
}

// queueFor spreads destinations over the queues and names them as River
// lists them to discover.
func TestQueueFor(t *testing.T) {
	seen := map[string]bool{}
	for i := range 1000 {
		q := queueFor(destinationOf("http://127.0.0.1:"+strconv.Itoa(20000+i)+"/hook"), 16)
		require.Regexp(t, queuePattern, q)
		seen[q] = true
	}
	assert.Len(t, seen, 16, "1,000 ports over 16 queues")
	assert.Equal(t, queueFor("http://a.example", 16), queueFor(destinationOf("HTTP://A.example/x"), 16))
	assert.Equal(t, "idem_outbox_00", queueFor("http://a.example", 1))
	assert.False(t, queuePattern.MatchString(queueName), "the queue of earlier versions is served anyway")
	s, err := newSettings(Config{Queues: 1000})
	require.NoError(t, err)
	assert.Len(t, s.queueNames(), maxQueues+1, "at most 100 queues, and the queue of earlier versions")
}
