package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/mysqlidem"
	"github.com/idemkit/idem/server"
)

// mysqlDatabase creates a database of the test's own on the server of
// MYSQL_DSN (default root@tcp(127.0.0.1:3306)/test), dropped when the test
// ends, and returns its DSN. The test skips without a server, and fails
// under CI=true.
func mysqlDatabase(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.Ping(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no MySQL at MYSQL_DSN (%s): %v; under CI=true the MySQL tests must run", dsn, err)
		}
		t.Skipf("no MySQL at MYSQL_DSN (%s): %v", dsn, err)
	}
	cfg.DBName = "idemctl_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	_, err = admin.Exec("CREATE DATABASE " + cfg.DBName)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + cfg.DBName) })
	return cfg.FormatDSN()
}

// mysqlCharges makes charges as redisCharges does, through the middleware
// on a mysqlidem store in the database of dsn: a "stuck-*" key's attempt
// answers 502 after its recovery point (its record stays, stuck), the
// others 201.
func mysqlCharges(t *testing.T, dsn string, keys ...string) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, mysqlidem.Migrate(context.Background(), db))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls, _ := server.LeaseFrom(r.Context())
		_ = ls.Checkpoint(r.Context(), "gateway-called", nil)
		if op, _ := server.OperationFrom(r.Context()); strings.HasPrefix(op.Key, "stuck-") {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"charge_id":"ch_1"}`))
	})
	mux := http.NewServeMux()
	cfg := server.Config{Mode: server.Leased, Scope: func(*http.Request) (string, string) { return "acme", "alice" },
		Logger: slog.New(slog.DiscardHandler)}
	mux.Handle("POST /v1/charges", server.Middleware(mysqlidem.New(db), cfg)(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, key := range keys {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
}

// idemctl looks up, lists in flight and evicts the records that the
// middleware wrote on MySQL (MariaDB here), with -mysql and no -db.
func TestRecordsOnMySQL(t *testing.T) {
	dsn := mysqlDatabase(t)
	mysqlCharges(t, dsn, "done-1", "done-2", "stuck-1")
	mctl := func(args ...string) (int, string, string) {
		t.Helper()
		return ctl(t, "", "", append([]string{"-mysql", dsn}, args...)...)
	}

	code, out, errOut := mctl(withScope("key", "-payload", "done-1")...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "done")
	assert.Contains(t, out, `{"charge_id":"ch_1"}`)
	code, out, errOut = mctl("key", "done-2")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "POST /v1/charges", "the key alone finds its scope")

	code, out, errOut = mctl(append([]string{"-json"}, withScope("key", "-payload", "stuck-1")...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, `{\"amount\":1}`, "the stuck record's stored request")

	code, out, errOut = mctl("inflight", "-stuck")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "stuck-1")
	assert.NotContains(t, out, "done-1")
	code, out, errOut = mctl("-json", "stats")
	require.Equal(t, exitOK, code, errOut)
	var s statsView
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	assert.EqualValues(t, 3, s.Records.Records)
	assert.Equal(t, 1, s.Records.Stuck)

	code, out, errOut = mctl(withScope("evict", "-yes", "stuck-1")...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "evicted")
	code, _, _ = mctl(withScope("key", "stuck-1")...)
	assert.Equal(t, exitNotFound, code)
	code, out, _ = mctl("inflight")
	require.Equal(t, exitOK, code)
	assert.NotContains(t, out, "stuck-1")

	code, _, errOut = mctl("parked")
	assert.Equal(t, exitUsage, code, "the outbox lives in Postgres: %s", errOut)
	code, _, errOut = ctl(t, "", "", "-mysql", dsn, "-redis", "redis://127.0.0.1:6379/0", "stats")
	assert.Equal(t, exitUsage, code, "two record stores: %s", errOut)
}

// A -mysql database without the store's table says so (exit 1), as -db's.
func TestMySQLWithoutRecords(t *testing.T) {
	dsn := mysqlDatabase(t)
	code, _, errOut := ctl(t, "", "", "-mysql", dsn, "stats")
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, errOut, "no idem_records table")
}
