//go:build unix

package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgcluster"
	"github.com/idemkit/idem/internal/pgtest"
)

// CheckDurability against real servers: a primary with a synchronous
// standby, then the same primary after its standby became asynchronous,
// after the standby died, and alone; and the standby itself.
func TestCheckDurabilityWithAndWithoutASynchronousStandby(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary := pgcluster.Start(t, pgcluster.Config{Settings: map[string]string{"fsync": "on", "synchronous_standby_names": "*"}})
	standby := primary.Standby(t, pgcluster.Config{Settings: map[string]string{"fsync": "on"}})
	pool := pgtest.NewPool(t, primary.URL())

	d := checkDurability(ctx, t, pool)
	require.True(t, d.Clean(), "a primary with a synchronous standby:\n%s", d)
	assert.Equal(t, "'*' (1 standbys connected, 1 synchronous)", d.Findings[4].Value)

	local := checkDurability(ctx, t, pgtest.NewPool(t, primary.URL()+"&synchronous_commit=local"))
	requireRisk(t, local, "synchronous_standby_names", "asynchronous replication")

	_, err := pool.Exec(ctx, `CREATE ROLE app LOGIN`)
	require.NoError(t, err)
	hidden := checkDurability(ctx, t, pgtest.NewPool(t, strings.Replace(primary.URL(), "postgres@", "app@", 1)))
	requireRisk(t, hidden, "synchronous_standby_names", "pg_monitor")

	requireRisk(t, checkDurability(ctx, t, pgtest.NewPool(t, standby.URL())), "role", "standby in recovery")

	setStandbyNames(ctx, t, pool, "ANY 2 (*)") // one standby for two: every commit would wait
	requireRisk(t, checkDurability(ctx, t, pool), "synchronous_standby_names", "2 synchronous standbys are required but only 1")

	setStandbyNames(ctx, t, pool, "")
	requireRisk(t, checkDurability(ctx, t, pool), "synchronous_standby_names", "a failover can lose operations already answered")

	require.NoError(t, standby.Kill())
	setStandbyNames(ctx, t, pool, "*")
	for d = checkDurability(ctx, t, pool); d.Findings[4].Value != "'*' (0 standbys connected, 0 synchronous)"; d = checkDurability(ctx, t, pool) {
		require.NoError(t, ctx.Err(), "the primary still lists its killed standby:\n%s", d)
		time.Sleep(10 * time.Millisecond) // polling for the WAL sender's end
	}
	requireRisk(t, d, "synchronous_standby_names", "none is connected in sync")

	setStandbyNames(ctx, t, pool, "")
	d = checkDurability(ctx, t, pool)
	require.True(t, d.Clean(), "a primary alone, fsync on:\n%s", d)
	assert.Contains(t, d.Findings[4].Meaning, "no standby")
}

func checkDurability(ctx context.Context, t *testing.T, db DB) Durability {
	t.Helper()
	d, err := CheckDurability(ctx, db)
	require.NoError(t, err)
	return d
}

// requireRisk requires the report to be unclean for the named finding,
// and that finding's meaning to say what.
func requireRisk(t *testing.T, d Durability, name, says string) {
	t.Helper()
	require.False(t, d.Clean(), "want a risk in %s:\n%s", name, d)
	for _, f := range d.Findings {
		if f.Name == name {
			require.True(t, f.Risk, "%s is no risk:\n%s", name, d)
			require.Contains(t, f.Meaning, says)
			return
		}
	}
	t.Fatalf("no finding %s:\n%s", name, d)
}

// setStandbyNames sets synchronous_standby_names on the primary and waits
// until a new session sees it (the reload is asynchronous).
func setStandbyNames(ctx context.Context, t *testing.T, pool DB, names string) {
	t.Helper()
	_, err := pool.Exec(ctx, `ALTER SYSTEM SET synchronous_standby_names = '`+names+`'`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	for {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		var now string
		err = conn.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names')`).Scan(&now)
		conn.Release()
		require.NoError(t, err)
		if now == names {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling for the reload
	}
}
