package orm

import (
	"context"
	"database/sql"
	"fmt"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/jmoiron/sqlx"
	"github.com/uptrace/bun"
	"gorm.io/gorm"

	"github.com/idemkit/idem/docs/orm/sqlcdb"
	"github.com/idemkit/idem/server"
)

// The recipes: each puts an ORM's statements in tx, the transaction of an
// idempotent request (server.SQLTx(ctx) on a Transactional route of a
// server.PostgresSQLStore), so that they commit with the stored response
// or not at all.

// GORM returns db running in tx: GORM's own Begin sets a session's
// ConnPool the same way. Its Create and Save skip their default
// transaction (tx is one already), and its Transaction makes savepoints.
func GORM(db *gorm.DB, tx *sql.Tx) *gorm.DB {
	g := db.Session(&gorm.Session{NewDB: true})
	g.Statement.ConnPool = tx
	return g
}

// Sqlx returns tx as an *sqlx.Tx with db's field mapper (Get, Select,
// QueryRowx). Named queries need db.BindNamed first: the driver name that
// would bind them is db's, and unexported in an *sqlx.Tx.
func Sqlx(db *sqlx.DB, tx *sql.Tx) *sqlx.Tx {
	return &sqlx.Tx{Tx: tx, Mapper: db.Mapper}
}

// Bun returns tx for a query's Conn: db.NewInsert().Conn(Bun(tx)).
func Bun(tx *sql.Tx) bun.IConn { return tx }

// Ent returns an ent driver over tx, for a generated client:
// entdb.NewClient(entdb.Driver(Ent(tx))) (entdb is generated from
// entdb/schema).
func Ent(tx *sql.Tx) *entsql.Driver {
	return entsql.NewDriver(dialect.Postgres, entsql.Conn{ExecQuerier: tx})
}

// Sqlc returns sqlc's generated queries over tx (its DBTX interface).
func Sqlc(tx *sql.Tx) *sqlcdb.Queries { return sqlcdb.New(tx) }

// GORMStoreIn stores the response of the request ctx belongs to in tx, a
// transaction GORM began itself (db.Transaction's), for a handler whose
// repository keeps its own transactions: write the response, call it last
// in the transaction's function, and GORM commits the payment and the
// record together (see server.StoreInSQLTx).
func GORMStoreIn(ctx context.Context, tx *gorm.DB) error {
	sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx)
	if !ok {
		return fmt.Errorf("orm: GORMStoreIn: %T is not a *sql.Tx (GORM's PrepareStmt mode wraps it)", tx.Statement.ConnPool)
	}
	return server.StoreInSQLTx(ctx, sqlTx)
}
