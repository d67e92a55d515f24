package main

import (
	"database/sql"
	"fmt"
	"io"
	"testing"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/internal/mysqltest"
)

// The demo on MariaDB (issue 44): the payments and their records in one
// transaction through mysqlidem; the idem column pays nothing twice, by
// the checker's count over the database's own rows, and the naive column,
// facing the same faults, does.
func TestDemoOnMySQL(t *testing.T) {
	o := shortRun(t)
	o.mysql = mysqltest.Database(t)
	res, report := runDemo(t, o)

	assert.Equal(t, 0, res.exitCode())
	idem := res.idem.report
	assert.NoError(t, idem.Err())
	assert.Zero(t, idem.DoubleEffects, "double payments in the idem column")
	assert.Zero(t, idem.LostOKs, "lost ok outcomes in the idem column")
	assert.Equal(t, o.n, idem.Operations)
	assert.Greater(t, idem.OK, o.n*4/5, "most payments succeed")
	assert.Greater(t, res.idem.summary.Requests, o.n, "the faults made the idem client retry")
	assert.Positive(t, res.naive.report.DoubleEffects, "the naive client pays twice")

	assert.Contains(t, report, "store mysql")
	assert.Contains(t, report, fmt.Sprintf("seed %d (rerun: %s)\n", o.seed, o.command()))
	assert.Contains(t, o.command(), " -mysql '")
	assert.Regexp(t, fmt.Sprintf(`DOUBLE PAYMENTS \(operations paid 2\+ times\) +0 +%d\n`, res.naive.report.DoubleEffects), report)
	assert.Contains(t, report, "outbox: not run")

	db, err := sql.Open("mysql", o.mysql)
	require.NoError(t, err)
	defer db.Close()
	var rows, keyed, records int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT idempotency_key) FROM payments WHERE tenant LIKE '%-idem'`).Scan(&rows, &keyed))
	assert.Equal(t, idem.Effects, rows, "the checker read the database's rows")
	assert.Equal(t, rows, keyed, "one payment per Idempotency-Key")
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM idem_records`).Scan(&records))
	assert.GreaterOrEqual(t, records, rows, "every payment's response is stored (mysqlidem)")
}

// -mysql replaces $DATABASE_URL's -db; with an explicit -db it is refused.
func TestMySQLFlag(t *testing.T) {
	getenv := func(string) string { return "postgres://elsewhere/db" }
	o, err := parseFlags([]string{"-mysql", "u:secret@tcp(h:3306)/d"}, io.Discard, getenv)
	require.NoError(t, err)
	assert.Empty(t, o.db, "DATABASE_URL's default gives way to -mysql")
	assert.NotContains(t, o.command(), "secret", "the rerun line hides the password")
	assert.Contains(t, o.command(), "-mysql 'u:xxxxx@tcp(h:3306)/d'")
	_, err = parseFlags([]string{"-db", "postgres://x/y", "-mysql", "u@tcp(h:3306)/d"}, io.Discard, getenv)
	assert.Error(t, err)
}
