package orm_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idemkit/idem/docs/orm"
	"github.com/idemkit/idem/mysqlidem"
	"github.com/idemkit/idem/server"
)

// mysqlRecipes are the recipes that take a *sql.Tx whatever the database
// (GORM, sqlx, bun), on MySQL or MariaDB through mysqlidem: the same one
// line puts the ORM's insert in the claim's transaction. (ent's recipe
// names the Postgres dialect, and sqlc's queries are generated for
// Postgres.)
var mysqlRecipes = []recipe{
	{name: "GORM", handler: func(t *testing.T, db *sql.DB) http.HandlerFunc {
		gdb, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: db, SkipInitializeWithVersion: true}), &gorm.Config{Logger: logger.Discard})
		require.NoError(t, err)
		return inTx(func(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
			p := Payment{Key: key, Amount: 2500}
			err := orm.GORM(gdb.WithContext(ctx), tx).Create(&p).Error
			return p.ID, err
		})
	}},
	{name: "sqlx", handler: func(t *testing.T, db *sql.DB) http.HandlerFunc {
		xdb := sqlx.NewDb(db, "mysql")
		return inTx(func(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
			res, err := orm.Sqlx(xdb, tx).ExecContext(ctx, "INSERT INTO payments (`key`, amount) VALUES (?, ?)", key, 2500)
			if err != nil {
				return 0, err
			}
			return res.LastInsertId()
		})
	}},
	{name: "bun", handler: func(t *testing.T, db *sql.DB) http.HandlerFunc {
		bdb := bun.NewDB(db, mysqldialect.New())
		return inTx(func(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
			p := &bunPayment{Key: key, Amount: 2500}
			_, err := bdb.NewInsert().Conn(orm.Bun(tx)).Model(p).Exec(ctx)
			return p.ID, err
		})
	}},
}

// mysqlKit is a database of its own on MYSQL_DSN with mysqlidem's table
// and the payments table, served behind a Transactional middleware on a
// mysqlidem.Store.
func mysqlServe(t *testing.T, r recipe) (*httptest.Server, *sql.DB) {
	t.Helper()
	db, err := sql.Open("mysql", mysqlDatabase(t))
	require.NoError(t, err)
	db.SetMaxOpenConns(16)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, mysqlidem.Migrate(context.Background(), db))
	_, err = db.Exec("CREATE TABLE payments (id BIGINT AUTO_INCREMENT PRIMARY KEY, `key` VARCHAR(64) NOT NULL, amount BIGINT NOT NULL)")
	require.NoError(t, err)
	mw := server.Middleware(mysqlidem.New(db), server.Config{Logger: slog.New(slog.DiscardHandler)})
	m := http.NewServeMux()
	m.Handle("POST /v1/payments", mw(r.handler(t, db)))
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return srv, db
}

func mysqlRows(t *testing.T, db *sql.DB, key string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM payments WHERE `key` = ?", key).Scan(&n))
	return n
}

// On MariaDB, the same key twice makes one row and a byte-identical
// replay, and 8 concurrent duplicates one row, through each recipe.
func TestRecipesOnMySQL(t *testing.T) {
	for _, r := range mysqlRecipes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			srv, db := mysqlServe(t, r)
			first, err := pay(srv.URL, "k-twice")
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, first.status, first.body)
			again, err := pay(srv.URL, "k-twice")
			require.NoError(t, err)
			assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
			assert.Equal(t, first.body, again.body, "byte for byte")
			assert.Equal(t, 1, mysqlRows(t, db, "k-twice"))

			replies := make([]reply, 8)
			var wg sync.WaitGroup
			for i := range replies {
				wg.Go(func() {
					rep, err := pay(srv.URL, "k-dup")
					assert.NoError(t, err)
					replies[i] = rep
				})
			}
			wg.Wait()
			for _, rep := range replies {
				assert.Contains(t, []int{http.StatusCreated, http.StatusConflict}, rep.status, rep.body)
			}
			assert.Equal(t, 1, mysqlRows(t, db, "k-dup"))
		})
	}
}

// mysqlDatabase creates a database of its own on the server of MYSQL_DSN
// (default root@tcp(127.0.0.1:3306)/test), dropped when t ends, and
// returns its DSN. Outside CI it skips when the server cannot be reached;
// under CI=true it fails.
func mysqlDatabase(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.Ping(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MySQL at MYSQL_DSN (%s) is not reachable: %v", dsn, err)
		}
		t.Skipf("MySQL at MYSQL_DSN (%s) is not reachable: %v", dsn, err)
	}
	name := "idemorm_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	_, err = admin.Exec("CREATE DATABASE " + name)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name) })
	cfg.DBName, cfg.InterpolateParams = name, true
	return cfg.FormatDSN()
}
