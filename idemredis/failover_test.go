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

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemredis/internal/redistest"
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
// gets its 201.
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
	refused                  int64 // answers other than 201 or 409 (503: not replicated; 500: completion lost)
	elapsed                  time.Duration
}

func (f failoverFigures) String() string {
	return fmt.Sprintf("%d operations, %d executions downstream, %d operations executed twice, %d refused answers retried, %s",
		f.ops, f.executions, f.doubles, f.refused, f.elapsed.Round(time.Millisecond))
}

// TestFailover kills the master under load, with and without WAIT for the
// replica: with, no operation runs twice downstream; without, the claims
// the replica had not received are lost, and their retries run again.
func TestFailover(t *testing.T) {
	for _, replicas := range []int{1, 0} {
		t.Run(fmt.Sprintf("Replicas=%d", replicas), func(t *testing.T) {
			f := runFailover(t, replicas)
			t.Logf("Replicas=%d: %s", replicas, f)
			assert.Equal(t, failoverOps, f.ops, "every operation answered 201")
			if replicas > 0 {
				assert.Zero(t, f.doubles, "with WAIT no operation runs twice downstream")
			} else {
				assert.Positive(t, f.doubles, "without WAIT the cut link must lose claims (the run does not test the failover otherwise)")
			}
		})
	}
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

func runFailover(t *testing.T, replicas int) failoverFigures {
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
	d := &downstream{runs: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/charges", server.Middleware(s, server.Config{Mode: server.Leased, Lease: failoverLease,
		Logger: slog.New(slog.DiscardHandler)})(http.HandlerFunc(d.charge)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	var done, refused atomic.Int64
	failed := make(chan struct{})
	go func() {
		for done.Load() < failoverStallAfter {
			time.Sleep(time.Millisecond)
		}
		promote := redis.NewClient(&redis.Options{Addr: replica.Addr})
		assert.NoError(t, promote.ReplicaOf(context.Background(), "NO", "ONE").Err())
		_ = promote.Close()
		time.Sleep(failoverStall)
		master.Kill()
		target.Store(replica.Addr)
		redistest.Replica(t, replica)
		close(failed)
	}()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keys := make(chan string)
	var wg sync.WaitGroup
	for range failoverWorkers {
		wg.Go(func() {
			for key := range keys {
				refused.Add(chargeUntilDone(ctx, srv, key))
				done.Add(1)
			}
		})
	}
	for i := range failoverOps {
		keys <- fmt.Sprintf("failover-%d-%04d", replicas, i)
	}
	close(keys)
	wg.Wait()
	require.NoError(t, ctx.Err(), "the charges did not finish within 60s")
	recv(t, failed)
	f := failoverFigures{elapsed: time.Since(start), refused: refused.Load()}
	for i := range failoverOps {
		n := d.runs[fmt.Sprintf("failover-%d-%04d", replicas, i)]
		f.executions += n
		if n > 1 {
			f.doubles++
		}
	}
	f.ops = int(done.Load())
	return f
}

// chargeUntilDone posts the charge until it gets its 201, waiting out a
// 409 for its Retry-After and anything else for 20 ms, and returns how
// many answers were neither.
func chargeUntilDone(ctx context.Context, srv *httptest.Server, key string) int64 {
	var refused int64
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
				return refused
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
	return refused
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
