// Package mysqltest gives a test of the payments example a database of its
// own on the MySQL or MariaDB server of MYSQL_DSN (default
// root@tcp(127.0.0.1:3306)/test), as mysqlidem's tests find it. Outside CI
// a test skips when the server cannot be reached; under CI=true it fails,
// so that a green CI means the MySQL tests ran.
package mysqltest

import (
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
)

// Database creates a database of its own for t, dropped when t ends, and
// returns its DSN.
func Database(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.Ping(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no MySQL at MYSQL_DSN (%s): %v; under CI=true the MySQL tests must run", dsn, err)
		}
		t.Skipf("no MySQL at MYSQL_DSN (%s): %v", dsn, err)
	}
	cfg.DBName = "payments_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	if _, err := admin.Exec("CREATE DATABASE " + cfg.DBName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + cfg.DBName) })
	return cfg.FormatDSN()
}
