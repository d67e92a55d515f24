package idemredis

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemredis/internal/redistest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// The failover run: failoverOps charges by failoverWorkers clients at
// once, each charge's handler calling the downstream (a counter per
// operation) for about a millisecond and a half. After the first
// failoverStallAfter charges the replica's link is cut (REPLICAOF NO ONE
// on the replica, as a partition would cut it) for failoverStall, while
// the master goes on accepting writes, as asynchronous replication lets
// it; then the master is killed (SIGKILL), the store's connections go to
// the replica, now the master, and a new replica of it is started, as
// Sentinel would reattach the old master. (A SIGSTOP of the replica loses
// too little to count: what the master wrote meanwhile waits in the
// replica's socket buffer.) Every client retries its charge until it
// gets its 201. Then every key is sent once more (a late duplicate), and
// each must be answered by a replay: one answered afresh is an answered
// result the failover lost. The same workload runs on a PostgresStore,
// without a failover (a committed row is on disk; BENCHMARKS.md §13
// fails a Postgres over).
const (
	failoverOps        = 3000
	failoverWorkers    = 16
	failoverStallAfter = 500
	failoverStall      = 300 * time.Millisecond
	failoverLease      = time.Second
)

// failoverFigures is what one run counted.
type failoverFigures struct {
	ops, executions, doubles int
	lost                     int   // late duplicates of answered charges not answered by a replay
	refused                  int64 // answers other than 201 or 409 (503: not replicated or not committed)
	elapsed                  time.Duration
}

func (f failoverFigures) String() string {
	return fmt.Sprintf("%d operations, %d executions downstream, %d operations executed twice, "+
		"%d answered results lost (late duplicates not replayed), %d refused answers retried, %s",
		f.ops, f.executions, f.doubles, f.lost, f.refused, f.elapsed.Round(time.Millisecond))
}

// TestFailover kills the master under load, with and without WAIT for the
// replica, and runs the same workload on Postgres: with WAIT, as on
// Postgres, no operation runs twice downstream and no answered result is
// lost; without, the writes the replica had not received are lost: the
// retries of lost claims run again, and late duplicates of lost
// completions are answered afresh. Each run's trace is checked against
// the record lifecycle's model (internal/trace), which assumes a durable
// store: with WAIT it must pass, without it must fail.
func TestFailover(t *testing.T) {
	for _, replicas := range []int{1, 0} {
		t.Run(fmt.Sprintf("Replicas=%d", replicas), func(t *testing.T) {
			rec := trace.Start(t)
			f := runFailover(t, redisFailover(t, replicas))
			if replicas > 0 {
				rec.Require(t, failoverOps)
			} else {
				requireTraceBroken(t, rec)
			}
			t.Logf("Replicas=%d: %s", replicas, f)
			assert.Equal(t, failoverOps, f.ops, "every operation answered 201")
			if replicas > 0 {
				assert.Zero(t, f.doubles, "with WAIT no operation runs twice downstream")
				assert.Zero(t, f.lost, "with WAIT no answered result is lost")
			} else {
				assert.Positive(t, f.doubles, "without WAIT the cut link must lose claims (the run does not test the failover otherwise)")
				assert.Positive(t, f.lost, "without WAIT the cut link must lose completions")
			}
		})
	}
	t.Run("Postgres", func(t *testing.T) {
		pool := pgtest.Pool(t)
		require.NoError(t, server.Migrate(context.Background(), pool))
		rec := trace.Start(t)
		f := runFailover(t, failoverSubject{store: server.NewPostgresStore(pool), fail: func() {}})
		rec.Require(t, failoverOps)
		t.Logf("Postgres: %s", f)
		assert.Equal(t, failoverOps, f.ops, "every operation answered 201")
		assert.Zero(t, f.doubles)
		assert.Zero(t, f.lost)
	})
}

// TestFailoverCatchesSeededFault: with WAIT configured, a completion
// acknowledged before its replica has it (trace.CompleteNotReplicated
// seeded into the store's code) is lost by the failover, and the run's
// trace check catches it.
func TestFailoverCatchesSeededFault(t *testing.T) {
	trace.Seed(t, trace.CompleteNotReplicated)
	rec := trace.Start(t)
	f := runFailover(t, redisFailover(t, 1))
	t.Logf("Replicas=1, %s seeded: %s", trace.CompleteNotReplicated, f)
	requireTraceBroken(t, rec)
}

// requireTraceBroken requires that rec's trace break the model.
func requireTraceBroken(t *testing.T, rec *trace.Recorder) {
	t.Helper()
	v := trace.Check(rec.Steps())
	require.NotNil(t, v, "the trace of a run that lost completions passed the model")
	t.Logf("the model refuses %v: %s (model state %v)", v.Step, v.Why, v.State)
}

// failoverSubject is a store and the failure injected into it after
// failoverStallAfter charges (fail returns once the store serves again).
type failoverSubject struct {
	store server.Store
	fail  func()
}

// redisFailover is a store on a master with one replica, and the failover:
// the cut link, the master's death, the promotion.
func redisFailover(t *testing.T, replicas int) failoverSubject {
	master := redistest.Start(t)
	replica := redistest.Replica(t, master)
	var target atomic.Value
	target.Store(master.Addr)
	c := redis.NewClient(&redis.Options{Addr: master.Addr, MaxRetries: -1, DialTimeout: time.Second,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, target.Load().(string))
		}})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{Replicas: replicas, ReplicaTimeout: 100 * time.Millisecond}, &storetest.Clock{})
	return failoverSubject{store: s, fail: func() {
		promote := redis.NewClient(&redis.Options{Addr: replica.Addr})
		assert.NoError(t, promote.ReplicaOf(context.Background(), "NO", "ONE").Err())
		_ = promote.Close()
		time.Sleep(failoverStall)
		master.Kill()
		target.Store(replica.Addr)
		redistest.Replica(t, replica)
	}}
}

// downstream counts the executions of each operation, as a card network
// would if it did not deduplicate.
type downstream struct {
	mu   sync.Mutex
	runs map[string]int
}

func (d *downstream) execute(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.runs[key]++
}

func (d *downstream) executed(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runs[key] > 0
}

// charge executes downstream on a first attempt; an attempt that took over
// looks the operation up first, as a careful handler does.
func (d *downstream) charge(w http.ResponseWriter, r *http.Request) {
	ls, _ := server.LeaseFrom(r.Context())
	key := r.Header.Get("Idempotency-Key")
	if _, took := ls.Recovery(); !took || !d.executed(key) {
		d.execute(key)
		time.Sleep(1500 * time.Microsecond) // the downstream call
	}
	w.WriteHeader(http.StatusCreated)
}

func runFailover(t *testing.T, subj failoverSubject) failoverFigures {
	d := &downstream{runs: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/charges", server.Middleware(subj.store, server.Config{Mode: server.Leased, Lease: failoverLease,
		Logger: slog.New(slog.DiscardHandler)})(http.HandlerFunc(d.charge)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	var done, refused atomic.Int64
	failed := make(chan struct{})
	go func() {
		for done.Load() < failoverStallAfter {
			time.Sleep(time.Millisecond)
		}
		subj.fail()
		close(failed)
	}()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keys := fmt.Sprintf("failover-%s-", uuid.NewString()[:8])
	charges := func(late bool) (lost int64) {
		work := make(chan string)
		var wg sync.WaitGroup
		for range failoverWorkers {
			wg.Go(func() {
				for key := range work {
					n, replayed := chargeUntilDone(ctx, srv, key)
					refused.Add(n)
					if !late {
						done.Add(1)
					} else if !replayed {
						atomic.AddInt64(&lost, 1)
					}
				}
			})
		}
		for i := range failoverOps {
			work <- fmt.Sprintf("%s%04d", keys, i)
		}
		close(work)
		wg.Wait()
		return lost
	}
	charges(false)
	require.NoError(t, ctx.Err(), "the charges did not finish within 60s")
	recv(t, failed)
	f := failoverFigures{ops: int(done.Load()), lost: int(charges(true))}
	require.NoError(t, ctx.Err(), "the late duplicates did not finish within 60s")
	f.elapsed, f.refused = time.Since(start), refused.Load()
	for i := range failoverOps {
		n := d.runs[fmt.Sprintf("%s%04d", keys, i)]
		f.executions += n
		if n > 1 {
			f.doubles++
		}
	}
	return f
}

// chargeUntilDone posts the charge until it gets its 201, waiting out a
// 409 for its Retry-After and anything else for 20 ms, and returns how
// many answers were neither, and whether the 201 was a replay.
func chargeUntilDone(ctx context.Context, srv *httptest.Server, key string) (refused int64, replayed bool) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := srv.Client().Do(req)
		wait := 20 * time.Millisecond
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusCreated:
				return refused, resp.Header.Get("Idempotent-Replayed") == "true"
			case http.StatusConflict:
				wait = 100 * time.Millisecond
			default:
				refused++
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return refused, false
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("nothing received after 30s")
		panic("unreachable")
	}
}
