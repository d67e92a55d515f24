package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// TestMemoryStoreConformance runs the store suite on MemoryStore.
func TestMemoryStoreConformance(t *testing.T) {
	rec := trace.Start(t)
	t.Cleanup(func() { rec.Require(t, 100) })
	var mu sync.Mutex
	waiters := map[server.Store]*atomic.Int64{}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, clock *storetest.Clock) server.Store {
			n := &atomic.Int64{}
			s := server.NewMemoryStoreAt(clock.Now, func(d int) { n.Add(int64(d)) })
			mu.Lock()
			waiters[s] = n
			mu.Unlock()
			return s
		},
		Waiting: func(t *testing.T, s server.Store, n int) {
			mu.Lock()
			w := waiters[s]
			mu.Unlock()
			poll(t, func() bool { return w.Load() >= int64(n) }, "%d claims waiting, want %d", w.Load, n)
		},
	})
}

// pgNode is a PostgresStore of the conformance run with what its harness
// needs: its pool and the application_name of its sessions.
type pgNode struct {
	pool *pgxpool.Pool
	url  string
	app  string
}

// TestPostgresStoreConformance runs the store suite on PostgresStore, each
// test in a schema of its own, the handlers' effects in their transaction.
func TestPostgresStoreConformance(t *testing.T) {
	rec := trace.Start(t)
	t.Cleanup(func() { rec.Require(t, 100) })
	monitor := pgtest.NewPool(t, pgtest.DatabaseURL(t))
	var mu sync.Mutex
	nodes := map[server.Store]pgNode{}
	open := func(t *testing.T, url string, clock *storetest.Clock) server.Store {
		app := "idem_st_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
		pool := pgtest.NewPool(t, url+"&application_name="+app)
		s := server.NewPostgresStore(pool)
		server.SetClockOffset(s, clock.Offset)
		mu.Lock()
		nodes[s] = pgNode{pool: pool, url: url, app: app}
		mu.Unlock()
		return s
	}
	node := func(s server.Store) pgNode {
		mu.Lock()
		defer mu.Unlock()
		return nodes[s]
	}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, clock *storetest.Clock) server.Store {
			url := pgtest.SchemaURL(t)
			s := open(t, url, clock)
			pool := node(s).pool
			require.NoError(t, server.Migrate(context.Background(), pool))
			_, err := pool.Exec(context.Background(), `CREATE TABLE effects (id bigserial PRIMARY KEY, label text NOT NULL)`)
			require.NoError(t, err)
			return s
		},
		Node: func(t *testing.T, s server.Store, clock *storetest.Clock) server.Store {
			return open(t, node(s).url, clock)
		},
		Waiting: func(t *testing.T, s server.Store, n int) {
			app := node(s).app
			var got int
			poll(t, func() bool {
				require.NoError(t, monitor.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
					WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&got))
				return got >= n
			}, "%d claims waiting on a lock, want %d", func() int64 { return int64(got) }, n)
		},
		Effect: func(ctx context.Context, label string) (bool, error) {
			tx, ok := server.Tx(ctx)
			if !ok {
				return false, nil
			}
			_, err := tx.Exec(ctx, `INSERT INTO effects (label) VALUES ($1)`, label)
			return true, err
		},
		Effects: func(t *testing.T, s server.Store, label string) int {
			var n int
			require.NoError(t, node(s).pool.QueryRow(context.Background(), `SELECT count(*) FROM effects WHERE label = $1`, label).Scan(&n))
			return n
		},
		EndTx: func(ctx context.Context) error {
			tx, _ := server.Tx(ctx)
			if _, err := tx.Exec(ctx, "commit"); !errors.Is(err, server.ErrTxEnded) {
				return fmt.Errorf("commit through the handler's Tx: %v, want server.ErrTxEnded", err)
			}
			return nil
		},
		LoseConn: func(ctx context.Context) error {
			tx, _ := server.Tx(ctx)
			return terminate(ctx, monitor, int(tx.Conn().PgConn().PID()))
		},
	})
}

// terminate ends the backend pid from another session, and waits until it
// has exited.
func terminate(ctx context.Context, monitor *pgxpool.Pool, pid int) error {
	var ok bool
	if err := monitor.QueryRow(ctx, `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&ok); err != nil || !ok {
		return fmt.Errorf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
	return nil
}

// poll checks done every 5 ms until it holds, failing t after 30 s with
// the message (format, the current count, n).
func poll(t *testing.T, done func() bool, format string, current func() int64, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf(format, current(), n)
		}
		time.Sleep(5 * time.Millisecond) // polling another session's state, not timing
	}
}
