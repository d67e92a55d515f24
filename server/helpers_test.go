package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/replaytest"
)

// testClock moves a store's clock forward without sleeping: the memory
// store reads time.Now plus the offset, the Postgres store adds it to the
// database clock.
type testClock struct{ off atomic.Int64 }

func (c *testClock) Advance(d time.Duration) { c.off.Add(int64(d)) }
func (c *testClock) offset() time.Duration   { return time.Duration(c.off.Load()) }
func (c *testClock) now() time.Time          { return time.Now().Add(c.offset()) }

// kit is a store under test with its clock and, for Postgres, its pool.
type kit struct {
	name  string
	store Store
	clock *testClock
	pool  *pgxpool.Pool // nil for the memory store
	url   string        // the pool's database URL (Postgres)

	app     string        // the pool's application_name (Postgres)
	monitor *pgxpool.Pool // a pool of its own for watching pg_stat_activity
	waiters chan struct{} // a duplicate started waiting (memory)

	mu      sync.Mutex
	effects map[string]int // effects outside a database transaction
}

func memoryKit(t *testing.T) *kit {
	t.Helper()
	k := &kit{name: "memory", clock: &testClock{}, effects: map[string]int{}, waiters: make(chan struct{}, 1024)}
	m := NewMemoryStore()
	m.now = k.clock.now
	m.waiting = func(delta int) {
		if delta > 0 {
			k.waiters <- struct{}{}
		}
	}
	k.store = m
	return k
}

func postgresKit(t *testing.T) *kit {
	t.Helper()
	url, app := appURL(t, pgtest.SchemaURL(t))
	k := postgresKitOn(t, pgtest.NewPool(t, url))
	k.url = url
	k.watch(t, app)
	return k
}

// watch makes waitForWaiters count the sessions named app, through a pool
// that the store under test cannot exhaust.
func (k *kit) watch(t *testing.T, app string) {
	t.Helper()
	k.app = app
	k.monitor = pgtest.NewPool(t, pgtest.DatabaseURL(t))
}

// appURL gives url a unique application_name, so that a test can find its
// own sessions in pg_stat_activity.
func appURL(t *testing.T, url string) (string, string) {
	t.Helper()
	app := "idem_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	return url + "&application_name=" + app, app
}

// recv receives from ch, failing the test after 30 s instead of hanging.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	return replaytest.Recv(t, ch)
}

// drainWaiters forgets the duplicates that waited so far.
func (k *kit) drainWaiters() {
	for {
		select {
		case <-k.waiters:
		default:
			return
		}
	}
}

// waitForWaiters blocks until n duplicates are waiting for a running
// attempt: on a lock in Postgres, on the attempt's channel in memory.
func (k *kit) waitForWaiters(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for got := 0; got < n; {
		if k.pool == nil {
			select {
			case <-k.waiters:
				got++
			case <-deadline:
				t.Fatalf("%d duplicates waiting after 30s, want %d", got, n)
			}
			continue
		}
		require.NoError(t, k.monitor.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, k.app).Scan(&got))
		select {
		case <-deadline:
			t.Fatalf("%d duplicates waiting on a lock after 30s, want %d", got, n)
		case <-time.After(5 * time.Millisecond): // poll again
		}
	}
}

// postgresKitOn migrates pool's schema and adds the effects table that
// test handlers write to.
func postgresKitOn(t *testing.T, pool *pgxpool.Pool) *kit {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, Migrate(ctx, pool))
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS effects (id bigserial PRIMARY KEY, label text NOT NULL)`)
	require.NoError(t, err)
	k := &kit{name: "postgres", clock: &testClock{}, pool: pool, effects: map[string]int{}}
	s := NewPostgresStore(pool)
	s.clock = k.clock.offset
	k.store = s
	return k
}

// eachStore runs f as a parallel subtest against each store of this
// package. The tests that call it need the package's insides (the
// reconciler's passes, the model's replay, a record written by hand);
// the conformance suite of Store is package storetest, which
// conformance_test.go runs on both stores.
func eachStore(t *testing.T, f func(t *testing.T, k *kit)) {
	t.Helper()
	for _, mk := range []struct {
		name string
		new  func(*testing.T) *kit
	}{{"memory", memoryKit}, {"postgres", postgresKit}} {
		t.Run(mk.name, func(t *testing.T) {
			t.Parallel()
			f(t, mk.new(t))
		})
	}
}

// effect records one effect of a handler: a row inserted in the request's
// transaction when there is one, else a counter outside any transaction.
func (k *kit) effect(ctx context.Context, label string) error {
	if tx, ok := Tx(ctx); ok {
		_, err := tx.Exec(ctx, `INSERT INTO effects (label) VALUES ($1)`, label)
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.effects[label]++
	return nil
}

// count is the number of effects with label that persisted.
func (k *kit) count(t *testing.T, label string) int {
	t.Helper()
	k.mu.Lock()
	n := k.effects[label]
	k.mu.Unlock()
	if k.pool != nil {
		var rows int
		require.NoError(t, k.pool.QueryRow(context.Background(), `SELECT count(*) FROM effects WHERE label = $1`, label).Scan(&rows))
		n += rows
	}
	return n
}

// quiet is a Config that logs nothing, for tests.
func quiet(cfg Config) Config {
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

// serve starts a loopback server on mux, closed when the test ends.
func serve(t *testing.T, mux *http.ServeMux) *httptest.Server {
	t.Helper()
	return replaytest.Serve(t, mux)
}

// reply is a response read in full.
type reply struct {
	status int
	header http.Header
	body   string
	err    error // the request failed: no response
}

func (r reply) replayed() bool { return r.header.Get("Idempotent-Replayed") == "true" }

// post sends a POST to path with the key (none when "") and body; extra
// is pairs of header names and values.
func post(t *testing.T, srv *httptest.Server, path, key, body string, extra ...string) reply {
	t.Helper()
	return send(t, srv, http.MethodPost, path, key, body, extra...)
}

// send is post with another method. It may be called from any goroutine.
func send(t *testing.T, srv *httptest.Server, method, path, key, body string, extra ...string) reply {
	t.Helper()
	r := replaytest.Send(t, srv, method, path, key, body, extra...)
	return reply{status: r.Status, header: r.Header, body: r.Body, err: r.Err}
}
