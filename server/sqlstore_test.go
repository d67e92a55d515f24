package server_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// sqlNode is a PostgresSQLStore of a test with its *sql.DB, the URL it was
// opened on and the application_name of its sessions.
type sqlNode struct {
	db  *sql.DB
	url string
	app string
}

// openSQL opens a *sql.DB on pgx's stdlib driver at url, its sessions named
// app, at most conns connections, closed when the test ends.
func openSQL(t *testing.T, url, app string, conns int) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url+"&application_name="+app)
	require.NoError(t, err)
	db.SetMaxOpenConns(conns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestPostgresSQLStoreConformance runs the store suite on PostgresSQLStore,
// each test in a schema of its own, the handlers' effects in their *sql.Tx.
func TestPostgresSQLStoreConformance(t *testing.T) {
	monitor := pgtest.NewPool(t, pgtest.DatabaseURL(t))
	var mu sync.Mutex
	nodes := map[server.Store]sqlNode{}
	open := func(t *testing.T, url string, clock *storetest.Clock) server.Store {
		app := "idem_sql_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
		db := openSQL(t, url, app, 8)
		s := server.NewPostgresSQLStore(db)
		server.SetSQLClockOffset(s, clock.Offset)
		mu.Lock()
		nodes[s] = sqlNode{db: db, url: url, app: app}
		mu.Unlock()
		return s
	}
	node := func(s server.Store) sqlNode {
		mu.Lock()
		defer mu.Unlock()
		return nodes[s]
	}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, clock *storetest.Clock) server.Store {
			url := pgtest.SchemaURL(t)
			s := open(t, url, clock)
			db := node(s).db
			_, err := db.ExecContext(context.Background(), server.Schema())
			require.NoError(t, err)
			_, err = db.ExecContext(context.Background(), `CREATE TABLE effects (id bigserial PRIMARY KEY, label text NOT NULL)`)
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
			tx, ok := server.SQLTx(ctx)
			if !ok {
				return false, nil
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (label) VALUES ($1)`, label)
			return true, err
		},
		Effects: func(t *testing.T, s server.Store, label string) int {
			var n int
			require.NoError(t, node(s).db.QueryRowContext(context.Background(), `SELECT count(*) FROM effects WHERE label = $1`, label).Scan(&n))
			return n
		},
		EndTx: func(ctx context.Context) error {
			tx, _ := server.SQLTx(ctx)
			return tx.Commit()
		},
		LoseConn: func(ctx context.Context) error {
			tx, _ := server.SQLTx(ctx)
			var pid int
			if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				return err
			}
			return terminate(ctx, monitor, pid)
		},
	})
}
