package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem/mysqlidem"
)

// openMySQL opens the mysqlidem store of -mysql, a go-sql-driver/mysql
// DSN (user:pass@tcp(host:3306)/db) whose database holds the
// idem_records table of [mysqlidem.Migrate], and checks that the server
// answers. It returns the store and the function that closes its pool.
func openMySQL(ctx context.Context, dsn string) (*mysqlidem.Store, func() error, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("-mysql: %w", err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("-mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(2) // one command at a time: a lookup, a page, an eviction
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("cannot reach MySQL: %w", err)
	}
	return mysqlidem.New(db), db.Close, nil
}

// erNoSuchTable is MySQL's error for a table that does not exist.
const erNoSuchTable = 1146

// mysqlMissingTable returns MySQL's message when err says that a table
// does not exist, and "" otherwise.
func mysqlMissingTable(err error) string {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == erNoSuchTable {
		return myErr.Message
	}
	return ""
}
