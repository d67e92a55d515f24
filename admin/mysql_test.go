package admin

import (
	"database/sql"
	"net/http"
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

// mysqlStore is a mysqlidem store in a database of the test's own on the
// server of MYSQL_DSN (default root@tcp(127.0.0.1:3306)/test), dropped
// when the test ends. The test skips without a server, and fails under
// CI=true.
func mysqlStore(t *testing.T) *mysqlidem.Store {
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
	cfg.DBName = "admin_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	_, err = admin.Exec("CREATE DATABASE " + cfg.DBName)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + cfg.DBName) })
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, mysqlidem.Migrate(t.Context(), db))
	return mysqlidem.New(db)
}

// The page on MySQL (MariaDB here), over records the middleware wrote
// there: it lists the stuck operation, shows a key's stored response,
// evicts a stuck record, and a live lease only with force.
func TestPagesOnMySQL(t *testing.T) {
	f := newFixtureOn(t, mysqlStore(t))
	f.call(t, "done-1")
	f.call(t, "stuck-1")
	f.call(t, "live-1")
	srv := f.page(t, Config{AllowWrites: true})

	status, body := get(t, srv, "/admin/inflight?stuck=1")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `<tr data-key="stuck-1" class="stuck">`)
	assert.NotContains(t, body, "live-1")
	status, body = get(t, srv, "/admin/key?"+scopeForm("done-1").Encode()+"&payload=1")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "the stored 201, replayed")
	assert.Contains(t, body, "ch_1")

	form := evictForm("stuck-1")
	form.Set("csrf", token(t, srv, "stuck-1"))
	status, _ = postForm(t, srv, "/admin/evict", form)
	assert.Equal(t, http.StatusSeeOther, status)
	_, err := f.lookup("stuck-1")
	assert.ErrorIs(t, err, server.ErrUnknownKey, "evicted")

	form = evictForm("live-1")
	form.Set("csrf", token(t, srv, "live-1"))
	status, body = postForm(t, srv, "/admin/evict", form)
	assert.Equal(t, http.StatusConflict, status)
	assert.Contains(t, body, "lease is live")
	form.Set("force", "1")
	status, _ = postForm(t, srv, "/admin/evict", form)
	assert.Equal(t, http.StatusSeeOther, status)
	_, err = f.lookup("live-1")
	assert.ErrorIs(t, err, server.ErrUnknownKey)
}
