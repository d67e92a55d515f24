package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/mysqlidem"
)

// openMySQLStorage returns MySQL or MariaDB storage at dsn: the payments in
// an api.MySQLBackend and their idempotency records in a mysqlidem.Store,
// on one pool, so that a payment's writes run in the *sql.Tx that the
// store hands the handler (server.SQLTx) and commit with its record. The
// schemas are applied and the expired records of earlier runs swept.
func openMySQLStorage(ctx context.Context, dsn string, concurrency int) (*storage, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("-mysql: %w", err)
	}
	cfg.InterpolateParams = true // one round trip a statement, as mysqlidem's docs advise
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("-mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(min(concurrency+4, 64))
	db.SetMaxIdleConns(min(concurrency+4, 64))
	store := mysqlidem.New(db)
	err = mysqlidem.Migrate(ctx, db)
	if err == nil {
		err = api.MigrateMySQL(ctx, db)
	}
	if err == nil {
		_, err = store.Sweep(ctx, 100_000)
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("-mysql: %w", err)
	}
	return &storage{backend: api.NewMySQLBackend(db), idem: store, name: "mysql", close: func() { _ = db.Close() }}, nil
}

// redactDSN returns dsn with its password replaced, for the rerun line.
func redactDSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxxxx"
	}
	return cfg.FormatDSN()
}
