package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		{"fewer synchronous standbys than required", func(f *durabilityFacts) { f.syncNames = "ANY 2 (s1, s2, s3)" },
			[]string{"synchronous_standby_names"}, "2 synchronous standbys are required but only 1"},
		{"as many synchronous standbys as required", func(f *durabilityFacts) {
			f.syncNames, f.standbys, f.synchronous = "FIRST 2 (s1, s2)", 2, 2
		}, nil, "loses none"},
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

func TestRequiredStandbys(t *testing.T) {
	for names, want := range map[string]int{
		"*": 1, "s1, s2": 1, "FIRST 2 (s1, s2, s3)": 2, "first 3 (a,b,c)": 3, "ANY 2 (*)": 2, "any 1 (s1, s2)": 1,
		"2 (s1, s2)": 2, "  2(s1, s2)": 2, "first, second": 1, "ANY": 1, "1s1": 1, "0 (s1)": 1,
	} {
		if got := requiredStandbys(names); got != want {
			t.Errorf("requiredStandbys(%q) = %d, want %d", names, got, want)
		}
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

func TestCheckDurabilityFailsWithoutADatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool := pgtest.NewPool(t, "postgres://nobody@127.0.0.1:1/none?connect_timeout=5")
	_, err := CheckDurability(ctx, pool)
	require.ErrorContains(t, err, "server: durability: ")
}
