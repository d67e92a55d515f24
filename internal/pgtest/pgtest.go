// Package pgtest gives tests an isolated PostgreSQL schema on the database
// named by DATABASE_URL. Outside CI a test skips with a clear message when no
// database is reachable; under CI=true it fails instead, so that a green CI
// run means the database tests ran. A package using it calls [Main] from its
// TestMain, which counts the skipped tests in one line.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DatabaseURL returns DATABASE_URL after checking that it is set and
// reachable, or skips (fails under CI=true) the test.
func DatabaseURL(tb testing.TB) string {
	tb.Helper()
	raw := os.Getenv("DATABASE_URL")
	if raw == "" {
		unavailable(tb, "DATABASE_URL is not set")
	}
	if err := reach(raw); err != nil {
		unavailable(tb, fmt.Sprintf("DATABASE_URL is not reachable: %v", err))
	}
	return raw
}

// reached holds, per database URL, a function that dials it the first
// time it is called and returns that attempt's result ever after: the
// tests of a process share one reachability check per URL.
var reached sync.Map // string -> func() error

// reach reports whether raw accepted a connection and a ping, checking
// once per process.
func reach(raw string) error {
	check, _ := reached.LoadOrStore(raw, sync.OnceValue(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, raw)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	}))
	return check.(func() error)()
}

func unavailable(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s; under CI=true the Postgres tests must run (bash .ci/run sets it up)", why)
	}
	countSkip(why)
	tb.Skipf("%s; skipping the Postgres test (bash .ci/run starts Postgres and sets it)", why)
}

// SchemaURL creates a fresh schema, dropped when the test ends, and returns
// a connection URL whose search_path selects it, for pools and for server
// processes started by the test.
func SchemaURL(tb testing.TB) string {
	tb.Helper()
	raw := DatabaseURL(tb)
	schema := "idem_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	exec(tb, raw, "CREATE SCHEMA "+schema)
	tb.Cleanup(func() { exec(tb, raw, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	return withSearchPath(tb, raw, schema)
}

// Pool returns a pool on a fresh schema (see SchemaURL), closed when the test
// ends.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return NewPool(tb, SchemaURL(tb))
}

// NewPool opens a pool on url, closed when the test ends. Two pools on one
// SchemaURL act as two server nodes on one database.
func NewPool(tb testing.TB, url string) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		tb.Fatalf("pgxpool.New: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

func exec(tb testing.TB, raw, sql string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		tb.Fatalf("pgx.Connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

func withSearchPath(tb testing.TB, raw, schema string) string {
	tb.Helper()
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatalf("DATABASE_URL must be a postgres:// URL, got %q", raw)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
