// Code in the shape sqlc v1.27 generates from query.sql and schema.sql
// (sqlc.yaml), kept by hand here so that the recipes need no sqlc binary.

package sqlcdb

import (
	"context"
	"database/sql"
)

// DBTX is what the queries need: *sql.DB, *sql.Tx and *sql.Conn have it.
type DBTX interface {
	ExecContext(context.Context, string, ...interface{}) (sql.Result, error)
	PrepareContext(context.Context, string) (*sql.Stmt, error)
	QueryContext(context.Context, string, ...interface{}) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...interface{}) *sql.Row
}

// New returns the queries on db.
func New(db DBTX) *Queries {
	return &Queries{db: db}
}

// Queries runs the statements of query.sql.
type Queries struct {
	db DBTX
}

// WithTx returns the queries on tx.
func (q *Queries) WithTx(tx *sql.Tx) *Queries {
	return &Queries{
		db: tx,
	}
}
