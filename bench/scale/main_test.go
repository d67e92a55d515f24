package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
)

// TestRunSmall runs every phase at a tiny size in a schema of its own on
// DATABASE_URL: 1,000 records, a sweep that must delete what expires, a
// replay and a storm that must pay once.
func TestRunSmall(t *testing.T) {
	c := config{db: pgtest.DatabaseURL(t), sizes: []int{0, 1000}, inflight: []int{2}, duration: 500 * time.Millisecond,
		chunk: 50, conns: 8, sweep: 3 * time.Second, sweepKeep: 500 * time.Millisecond, sweepEvery: 500 * time.Millisecond,
		sample: time.Second, sweepInflight: 4, storms: 1, storm: 50, reply: 100}
	var out bytes.Buffer
	if err := run(context.Background(), c, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	report := out.String()
	for _, want := range []string{"at 1000 records: 1000 live", "sweep phase", "replay: 100 requests", "storm: 1 storms of 50"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	if !sweptSome(report) {
		t.Errorf("the sweeper deleted nothing in the sweep phase:\n%s", report)
	}
}

// sweptSome reports whether the sweep phase's summary counts records
// swept.
func sweptSome(report string) bool {
	m := regexp.MustCompile(`records inserted, (\d+) swept`).FindStringSubmatch(report)
	return m != nil && m[1] != "0"
}

// Each wrong flag gets an error that names it.
func TestParseRefusesBadFlags(t *testing.T) {
	good := func() config {
		return config{duration: time.Second, chunk: 1, conns: 1, sweepInflight: 1, sample: time.Second,
			sweep: time.Second, sweepKeep: time.Second, sweepEvery: time.Second, storms: 1, storm: 1}
	}
	c := good()
	require.NoError(t, c.parse("0,10", "4"))
	for _, tc := range []struct {
		name            string
		edit            func(*config)
		sizes, inflight string
		want            string
	}{
		{"sizes not numbers", nil, "0,x", "4", "-sizes"},
		{"sizes descending", nil, "10,0", "4", "ascending"},
		{"no in-flight", nil, "0", "0", "-inflight"},
		{"retention 0", func(c *config) { c.sweepKeep = 0 }, "0", "4", "-sweep-retention"},
		{"interval 0", func(c *config) { c.sweepEvery = 0 }, "0", "4", "-sweep-interval"},
		{"negative batch", func(c *config) { c.sweepBatch = -1 }, "0", "4", "-sweep-batch"},
		{"negative autovacuum scale", func(c *config) { c.vacuumScale = -1 }, "0", "4", "-autovacuum-scale"},
		{"storm of 0", func(c *config) { c.storm = 0 }, "0", "4", "-storm "},
		{"pg-options with db", func(c *config) { c.db, c.pgOptions = "postgres://x", "-c a=b" }, "0", "4", "-pg-options"},
	} {
		c := good()
		if tc.edit != nil {
			tc.edit(&c)
		}
		err := c.parse(tc.sizes, tc.inflight)
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
	}
}

// Off the PATH (Debian's packages), initdb and pg_ctl are found under
// /usr/lib/postgresql/<version>/bin.
func TestPgBinOffThePath(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(found) == 0 {
		t.Skip("no /usr/lib/postgresql/*/bin/initdb on this machine")
	}
	for _, name := range []string{"initdb", "pg_ctl"} {
		got := pgBin(name)
		require.True(t, filepath.IsAbs(got), "%s: %s", name, got)
		require.FileExists(t, got)
	}
}

// A key=value connection string works as well as a URL: the schema goes
// to the pool's search_path, not into the string.
func TestDBTargetTakesAnyConnectionString(t *testing.T) {
	for _, dsn := range []string{"host=127.0.0.1 dbname=test", "postgres://root@127.0.0.1:5432/test?sslmode=disable"} {
		pool, err := dbTarget{dsn: dsn, schema: "scale_bench_x"}.open(context.Background(), 1)
		require.NoError(t, err, dsn)
		assert.Equal(t, "scale_bench_x", pool.Config().ConnConfig.RuntimeParams["search_path"], dsn)
		pool.Close()
	}
}
