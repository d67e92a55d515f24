// Package mysqltest gives each test a database of its own on the MySQL or
// MariaDB server of MYSQL_DSN (default root@tcp(127.0.0.1:3306)/test).
// Outside CI a test skips when the server cannot be reached; under
// CI=true it fails, so that a green CI means the tests ran.
package mysqltest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
)

// defaultDSN is the server of this project's machines.
const defaultDSN = "root@tcp(127.0.0.1:3306)/test"

// DSN returns the server's DSN from MYSQL_DSN, or the default.
func DSN() string {
	if dsn := os.Getenv("MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return defaultDSN
}

// reached checks once per process that the server answers.
var reached = sync.OnceValue(func() error {
	db, err := sql.Open("mysql", DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return db.PingContext(ctx)
})

// Database creates a database of its own for t, dropped when t ends, and
// returns the DSN of it (with interpolateParams=true).
func Database(t testing.TB) string {
	t.Helper()
	if err := reached(); err != nil {
		msg := fmt.Sprintf("MySQL at MYSQL_DSN (%s) is not reachable: %v", DSN(), err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cfg, err := mysql.ParseDSN(DSN())
	if err != nil {
		t.Fatal(err)
	}
	name := "idemtest_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name)
		_ = admin.Close()
	})
	cfg.DBName = name
	cfg.InterpolateParams = true
	return cfg.FormatDSN()
}

// Open opens a *sql.DB on dsn with at most conns connections, closed when
// t ends.
func Open(t testing.TB, dsn string, conns int) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(conns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
