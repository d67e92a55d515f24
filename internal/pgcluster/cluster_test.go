//go:build unix

package pgcluster

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A standby streams what its primary commits; once the primary is killed
// it refuses connections and its backends are gone, and the promoted
// standby takes writes, with the primary's data.
func TestStandbyIsPromotedAfterThePrimaryIsKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary := Start(t, Config{Settings: map[string]string{"synchronous_standby_names": "*"}})
	standby := primary.Standby(t, Config{})

	execSQL(ctx, t, primary.URL(), `CREATE TABLE t (v int); INSERT INTO t VALUES (1)`) // synchronous: on the standby once it returns
	// A backend that cannot notice its postmaster's death by itself (it is
	// stopped, as a stalled WAL sender is) dies with it too.
	var backend int
	require.NoError(t, connect(ctx, t, primary.URL()).QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend))
	require.NoError(t, syscall.Kill(backend, syscall.SIGSTOP))
	require.NoError(t, primary.Kill())
	assert.False(t, alive(backend), "a backend of the killed primary is alive")
	_, err := pgx.Connect(ctx, primary.URL())
	require.Error(t, err, "a connection to the killed primary")
	assert.True(t, inRecovery(ctx, t, standby.URL()), "the standby before its promotion")

	require.NoError(t, standby.Promote())
	assert.False(t, inRecovery(ctx, t, standby.URL()), "the standby after its promotion")
	execSQL(ctx, t, standby.URL(), `INSERT INTO t VALUES (2)`)
	var sum int
	conn := connect(ctx, t, standby.URL())
	require.NoError(t, conn.QueryRow(ctx, `SELECT sum(v) FROM t`).Scan(&sum))
	assert.Equal(t, 3, sum, "the rows of the promoted standby, want the primary's and its own")
}

func TestSettingsReachTheServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := Start(t, Config{Settings: map[string]string{"fsync": "on", "synchronous_standby_names": "ANY 1 (a, b)"}})
	conn := connect(ctx, t, c.URL())
	var fsync, names string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_standby_names')`).Scan(&fsync, &names))
	assert.Equal(t, "on", fsync)
	assert.Equal(t, "ANY 1 (a, b)", names)
}

func connect(ctx context.Context, t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func execSQL(ctx context.Context, t *testing.T, url, sql string) {
	t.Helper()
	_, err := connect(ctx, t, url).Exec(ctx, sql)
	require.NoError(t, err, sql)
}

func inRecovery(ctx context.Context, t *testing.T, url string) bool {
	t.Helper()
	var in bool
	require.NoError(t, connect(ctx, t, url).QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&in))
	return in
}
