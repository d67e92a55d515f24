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

// safeFacts are a primary whose commits wait for one synchronous standby,
// on disks that flush: nothing to report.
var safeFacts = durabilityFacts{syncCommit: "on", syncNames: "*", fsync: "on", fullPageWrites: "on", standbys: 1, synchronous: 1}

func TestDurabilityJudgesEachSetting(t *testing.T) {
	cases := []struct {
		name  string
		facts func(f *durabilityFacts)
		risks []string // the findings that are risks, in order
		says  string   // a part of the risk's meaning (or of the replication finding's when no risk)
	}{
		{"synchronous standby", func(*durabilityFacts) {}, nil, "a failover to a synchronous standby loses none"},
		{"remote_apply", func(f *durabilityFacts) { f.syncCommit = "remote_apply" }, nil, "loses none"},
		{"remote_write", func(f *durabilityFacts) { f.syncCommit = "remote_write" }, nil, "loses none"},
		{"no standby", func(f *durabilityFacts) { f.syncNames, f.standbys, f.synchronous = "", 0, 0 }, nil, "its disk is the only copy"},
		{"asynchronous standby", func(f *durabilityFacts) { f.syncNames, f.synchronous = "", 0 },
			[]string{"synchronous_standby_names"}, "a failover can lose operations already answered"},
		{"commits that do not wait for the standby", func(f *durabilityFacts) { f.syncCommit = "local" },
			[]string{"synchronous_standby_names"}, "asynchronous replication"},
		{"commits not flushed", func(f *durabilityFacts) { f.syncCommit = "off" },
			[]string{"synchronous_commit", "synchronous_standby_names"}, "before its WAL is on disk"},
		{"synchronous standby not connected", func(f *durabilityFacts) { f.standbys, f.synchronous = 0, 0 },
			[]string{"synchronous_standby_names"}, "none is connected in sync"},
		{"standby state hidden from the role", func(f *durabilityFacts) { f.synchronous, f.hidden = 0, 1 },
			[]string{"synchronous_standby_names"}, "pg_monitor"},
		{"fsync off", func(f *durabilityFacts) { f.fsync = "off" }, []string{"fsync"}, "not flushed to disk"},
		{"full_page_writes off", func(f *durabilityFacts) { f.fullPageWrites = "off" }, []string{"full_page_writes"}, "torn page"},
		{"a standby", func(f *durabilityFacts) { f.inRecovery, f.standbys, f.synchronous = true, 0, 0 }, []string{"role"}, "takes no writes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := safeFacts
			c.facts(&f)
			d := f.judge()
			require.Len(t, d.Findings, 5)
			var risks []string
			said := ""
			for _, finding := range d.Findings {
				if finding.Risk {
					risks = append(risks, finding.Name)
					said += finding.Meaning
				}
			}
			if len(risks) == 0 {
				said = d.Findings[4].Meaning
			}
			assert.Equal(t, c.risks, risks, "the findings that are risks:\n%s", d)
			assert.Equal(t, len(c.risks) == 0, d.Clean(), "Clean")
			assert.Contains(t, said, c.says)
		})
	}
}

func TestDurabilityString(t *testing.T) {
	f := safeFacts
	f.fsync = "off"
	s := f.judge().String()
	assert.Equal(t, 5, strings.Count(s, "\n"), "lines of:\n%s", s)
	assert.Contains(t, s, "risk fsync = off: commits are not flushed")
	assert.Contains(t, s, "ok   role = primary: ")
}

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

func TestCheckDurabilityFailsWithoutADatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool := pgtest.NewPool(t, "postgres://nobody@127.0.0.1:1/none?connect_timeout=5")
	_, err := CheckDurability(ctx, pool)
	require.ErrorContains(t, err, "server: durability: ")
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
