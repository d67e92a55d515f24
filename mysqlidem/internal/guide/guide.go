// Package guide is the code that docs/server.md shows of mysqlidem, so
// that internal/docs's TestReadmeSnippetsAreCompiled can hold the guide to
// code that this module compiles.
package guide

import (
	"context"
	"database/sql"
	"net/http"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver

	"github.com/idemkit/idem/mysqlidem"
	"github.com/idemkit/idem/server"
)

// Mount is docs/server.md's "Stores": a Transactional route whose handler
// writes in the claim's *sql.Tx on MySQL or MariaDB.
func Mount(ctx context.Context, mux *http.ServeMux, pay http.Handler) error {
	db, err := sql.Open("mysql", "app@tcp(db:3306)/shop?interpolateParams=true")
	if err != nil {
		return err
	}
	if err := mysqlidem.Migrate(ctx, db); err != nil {
		return err
	}
	mux.Handle("POST /v1/payments", server.Middleware(mysqlidem.New(db), server.Config{})(pay))
	return nil
}
