package main

import (
	"context"
	"fmt"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/examples/payments/internal/mysqlopen"
)

// openMySQLStorage returns MySQL or MariaDB storage at dsn: the payments in
// an api.MySQLBackend and their idempotency records in a mysqlidem.Store,
// on one pool, so that a payment's writes run in the *sql.Tx that the
// store hands the handler (server.SQLTx) and commit with its record. The
// schemas are applied and the expired records of earlier runs swept.
func openMySQLStorage(ctx context.Context, dsn string, concurrency int) (*storage, error) {
	db, store, err := mysqlopen.Open(ctx, dsn, min(concurrency+4, 64))
	if err != nil {
		return nil, err
	}
	if _, err := store.Sweep(ctx, 100_000); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("-mysql: %w", err)
	}
	return &storage{backend: api.NewMySQLBackend(db), idem: store, name: "mysql", close: func() { _ = db.Close() }}, nil
}
