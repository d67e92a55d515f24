package mysqlidem

import (
	"database/sql"
	"os"
	"testing"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
)

func sqlOpen(dsn string) (*sql.DB, error) { return sql.Open("mysql", dsn) }

// binDir holds the programs the tests build.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mysqlidem-test-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
