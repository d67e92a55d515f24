package mysqlidem

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/mysqlidem/internal/mysqltest"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// testNode is a store of a test with the DSN of its database.
type testNode struct {
	dsn string
	db  string // the database's name
}

// TestConformance runs the store suite on the server of MYSQL_DSN, both
// modes, each test in a database of its own, the Transactional handlers'
// effects in their *sql.Tx, under the server's isolation level
// (REPEATABLE READ, InnoDB's default).
func TestConformance(t *testing.T) { conformance(t, "") }

// TestConformanceReadCommitted runs the suite with every session of the
// stores under READ COMMITTED, whose locking reads take no gap locks.
func TestConformanceReadCommitted(t *testing.T) { conformance(t, "READ-COMMITTED") }

// conformance runs the suite with the sessions' isolation level set to
// isolation ("": the server's).
func conformance(t *testing.T, isolation string) {
	rec := trace.Start(t)
	t.Cleanup(func() { rec.Require(t, 100) })
	var mu sync.Mutex
	nodes := map[server.Store]testNode{}
	open := func(t *testing.T, dsn string, clock *storetest.Clock) *Store {
		s := New(mysqltest.Open(t, dsn, 16))
		s.offset = clock.Offset
		mu.Lock()
		nodes[s] = testNode{dsn: dsn, db: dbName(t, s)}
		mu.Unlock()
		return s
	}
	node := func(s server.Store) testNode {
		mu.Lock()
		defer mu.Unlock()
		return nodes[s]
	}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T, clock *storetest.Clock) server.Store {
			s := open(t, withIsolation(t, mysqltest.Database(t), isolation), clock)
			require.NoError(t, Migrate(context.Background(), s.db))
			_, err := s.db.Exec(`CREATE TABLE effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, label VARCHAR(64) NOT NULL) ENGINE=InnoDB`)
			require.NoError(t, err)
			return s
		},
		Node: func(t *testing.T, s server.Store, clock *storetest.Clock) server.Store {
			return open(t, node(s).dsn, clock)
		},
		Waiting: func(t *testing.T, s server.Store, n int) {
			waiting(t, s.(*Store), node(s).db, n)
		},
		Effect: func(ctx context.Context, label string) (bool, error) {
			tx, ok := server.SQLTx(ctx)
			if !ok {
				return false, nil
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (label) VALUES (?)`, label)
			return true, err
		},
		Effects: func(t *testing.T, s server.Store, label string) int {
			var n int
			require.NoError(t, s.(*Store).db.QueryRow(`SELECT COUNT(*) FROM effects WHERE label = ?`, label).Scan(&n))
			return n
		},
		EndTx: func(ctx context.Context) error {
			tx, _ := server.SQLTx(ctx)
			return tx.Commit()
		},
		LoseConn: func(ctx context.Context) error {
			tx, _ := server.SQLTx(ctx)
			var id int64
			if err := tx.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
				return err
			}
			admin, err := sqlOpen(mysqltest.DSN())
			if err != nil {
				return err
			}
			defer admin.Close()
			_, err = admin.ExecContext(ctx, "KILL ?", id)
			return err
		},
	})
}

// dbName is the name of the database of s's connections.
func dbName(t *testing.T, s *Store) string {
	var name string
	require.NoError(t, s.db.QueryRow(`SELECT DATABASE()`).Scan(&name))
	return name
}

// waiting blocks until n sessions of the database db run a claim's
// statement that locks the key's row, which a claim that does not wait
// ends in microseconds. (MariaDB 10.11 does not list the transaction of a
// session that waits on a row's implicit lock in innodb_trx.)
func waiting(t *testing.T, s *Store, db string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		require.NoError(t, s.db.QueryRow(`SELECT COUNT(*) FROM information_schema.processlist
			WHERE db = ? AND command = 'Query' AND info LIKE '%ON DUPLICATE KEY UPDATE scope_hash%'`, db).Scan(&got))
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d claims waiting on a row lock after 30 s, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// withIsolation sets the sessions' isolation level in dsn, by the name
// the server knows (tx_isolation on MariaDB before 11.1, and on MySQL
// before 8.0, transaction_isolation since).
func withIsolation(t *testing.T, dsn, isolation string) string {
	if isolation == "" {
		return dsn
	}
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	db := mysqltest.Open(t, dsn, 1)
	name := "transaction_isolation"
	if db.QueryRow("SELECT @@transaction_isolation").Err() != nil {
		name = "tx_isolation"
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[name] = "'" + isolation + "'"
	out := cfg.FormatDSN()
	var got string
	require.NoError(t, mysqltest.Open(t, out, 1).QueryRow("SELECT @@"+name).Scan(&got))
	require.Equal(t, isolation, got)
	return out
}
