package orm

import (
	"context"
	"database/sql"
	"net/http"
	"os"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of database/sql

	"github.com/idemkit/idem/server"
)

// The Go blocks of docs/database-sql.md that are not recipes, compiled
// here (internal/docs holds the blocks to these functions' text).

// GuideSQLStore mounts a Transactional route on a PostgresSQLStore.
func GuideSQLStore(mux *http.ServeMux) (*sql.DB, error) {
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL")) // pgx's stdlib driver: import _ "github.com/jackc/pgx/v5/stdlib"
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(32) // a claim holds a connection, and so does each duplicate waiting for it
	store := server.NewPostgresSQLStore(db)
	mux.Handle("POST /v1/payments", server.Middleware(store, server.Config{})(http.HandlerFunc(pay)))
	return db, nil
}

func pay(w http.ResponseWriter, r *http.Request) {
	tx, _ := server.SQLTx(r.Context())
	// The payment's writes, in tx (or through an ORM, below).
	if _, err := tx.ExecContext(r.Context(), "INSERT INTO payments (amount) VALUES ($1)", 100); err != nil {
		http.Error(w, "payments are down", http.StatusServiceUnavailable) // a 5xx rolls tx back
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// GuideOwnTx is a repository's handler that begins its own transaction and
// stores the response in it.
func GuideOwnTx(ctx context.Context, db *sql.DB, w http.ResponseWriter, body []byte) error {
	tx, err := db.BeginTx(ctx, nil) // the repository's
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO payments (amount) VALUES ($1)", 100); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(body)
	if err := server.StoreInSQLTx(ctx, tx); err != nil {
		return err // the middleware answers 500 commit-failed
	}
	return tx.Commit()
}
