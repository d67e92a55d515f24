// Package mysqlopen opens the payments example's MySQL or MariaDB storage
// from a -mysql flag, for the demo and the server program alike.
package mysqlopen

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/mysqlidem"
)

// Open opens a pool on dsn (a go-sql-driver/mysql DSN, sent with
// interpolateParams=true: one round trip a statement) of at most conns
// connections (0: no bound), applies mysqlidem's schema and
// api.MigrateMySQL's, and returns the pool and the idempotency store on
// it. On an error nothing is left open; ctx governs the migrations.
func Open(ctx context.Context, dsn string, conns int) (*sql.DB, *mysqlidem.Store, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("-mysql: %w", err)
	}
	cfg.InterpolateParams = true
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("-mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	if conns > 0 {
		db.SetMaxOpenConns(conns)
		db.SetMaxIdleConns(conns)
	}
	err = mysqlidem.Migrate(ctx, db)
	if err == nil {
		err = api.MigrateMySQL(ctx, db)
	}
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("-mysql: %w", err)
	}
	return db, mysqlidem.New(db), nil
}

// Redact returns dsn with its password replaced, for a command line that
// is printed.
func Redact(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxxxx"
	}
	return cfg.FormatDSN()
}
