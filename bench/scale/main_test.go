package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

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
