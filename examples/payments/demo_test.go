package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/gobuild"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/testserver"
)

// shortRun is the demo in short form, for CI.
func shortRun(t *testing.T) options {
	t.Helper()
	return options{n: 300, seed: testserver.Seed(t), concurrency: 8, faults: "default", attemptTimeout: 500 * time.Millisecond}
}

// demoBound bounds a demo run in the tests: it stops a stuck run, and is
// no speed requirement. A loaded two-core machine is slow: at load average
// 20 the short run on Postgres took 38 s of the minute it had then.
const demoBound = 5 * time.Minute

// runDemo runs the demo bounded by demoBound and returns its result and
// printed report.
func runDemo(t *testing.T, o options) (result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), demoBound)
	defer cancel()
	var out bytes.Buffer
	res, err := run(ctx, o, &out, noProgress())
	require.NoError(t, err)
	t.Logf("report:\n%s", out.String())
	return res, out.String()
}

// The acceptance of issue 6: the idem column keeps every promise, by the
// checker's count; the naive column, facing the same faults, pays twice.
func TestDemo(t *testing.T) {
	for _, store := range []string{"memory", "postgres"} {
		t.Run(store, func(t *testing.T) {
			o := shortRun(t)
			if store == "postgres" {
				o.db = pgtest.SchemaURL(t)
			}
			res, report := runDemo(t, o)

			assert.Equal(t, 0, res.exitCode())
			idem := res.idem.report
			assert.NoError(t, idem.Err())
			assert.Zero(t, idem.DoubleEffects, "double payments in the idem column")
			assert.Zero(t, idem.LostOKs, "lost ok outcomes in the idem column")
			assert.Equal(t, o.n, idem.Operations)
			assert.Greater(t, idem.OK, o.n*4/5, "most payments succeed")
			assert.Positive(t, res.naive.report.DoubleEffects, "the naive client pays twice")
			assert.Equal(t, res.naive.report.DoubleEffects, len(res.naive.report.Violations),
				"the naive client's only violations are double payments")

			assert.Contains(t, report, fmt.Sprintf("seed %d (rerun: %s)\n", o.seed, o.command()))
			assert.Contains(t, report, "A rerun meets the same fault at every (payment, attempt)")
			assert.Positive(t, res.idem.waitedRetryAfter, "the idem client honoured the 503 bursts' Retry-After")
			assert.Zero(t, res.naive.waitedRetryAfter, "the naive client ignores Retry-After")
			assert.Positive(t, res.naive.waitedOwn, "the naive client's fixed pauses")
			assert.Regexp(t, `waits before retries, all payments +\S+ +\S+\n`, report)
			assert.Contains(t, report, "store "+store)
			assert.Regexp(t, fmt.Sprintf(`DOUBLE PAYMENTS \(operations paid 2\+ times\) +0 +%d\n`, res.naive.report.DoubleEffects), report)
			assert.Greater(t, res.idem.summary.Requests, o.n, "the faults made the idem client retry")
			for _, c := range []column{res.idem, res.naive} {
				assert.Equal(t, c.report.Effects, c.notes.enqueued, "%s: a notification per payment", c.name)
				assert.Equal(t, c.notes.enqueued, c.notes.delivered+c.notes.parked, "%s: every notification settled", c.name)
				assert.False(t, c.notes.violated(), "%s: notifications delivered twice or lost: %+v", c.name, c.notes)
				assert.Greater(t, c.notes.attempts, c.notes.delivered, "%s: the faults made the dispatcher retry", c.name)
			}
			assert.Regexp(t, `DELIVERED TWICE +0 +0\n`, report)
		})
	}
}

// The exit status says when the idem column broke a promise: against a
// server that ignores keys, its retries pay twice too.
func TestDemoFailsWhenTheServerIgnoresKeys(t *testing.T) {
	o := shortRun(t)
	o.stripKeys = true
	res, report := runDemo(t, o)
	assert.Equal(t, 1, res.exitCode())
	assert.True(t, errors.Is(res.idem.report.Err(), testserver.ErrDoubleEffect), "idem column: %v", res.idem.report.Err())
	assert.Contains(t, report, "idem client: ")
	assert.Regexp(t, `idem client: \d+ violations`, report)
}

// The program itself, built and run in its short form: exit status 0 with
// a report, 2 for bad flags.
func TestDemoProgram(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "payments")
	require.NoError(t, gobuild.Build(".", bin))

	ctx, cancel := context.WithTimeout(context.Background(), demoBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-n", "100", "-concurrency", "8", "-db", "", "-seed", "42")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "exit status; stderr:\n%s", stderr.String())
	assert.Contains(t, stdout.String(), "seed 42 ")
	assert.Contains(t, stdout.String(), "idem client: no violation")

	err := exec.CommandContext(ctx, bin, "-faults", "lots").Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 2, exit.ExitCode())
}

func TestParseFlags(t *testing.T) {
	env := func(string) string { return "postgres://db/test" }
	o, err := parseFlags([]string{"-n", "10", "-seed", "5", "-faults", "0.3"}, io.Discard, env)
	require.NoError(t, err)
	assert.Equal(t, options{n: 10, seed: 5, concurrency: 32, faults: "0.3", db: "postgres://db/test",
		attemptTimeout: 500 * time.Millisecond}, o)

	for _, args := range [][]string{{"-n", "0"}, {"-concurrency", "0"}, {"-faults", "1.5"}, {"-faults", "lots"}, {"extra"}, {"-attempt-timeout", "0s"}} {
		var stderr strings.Builder
		_, err := parseFlags(args, &stderr, env)
		assert.Error(t, err, "%v", args)
	}
}

func TestParseFaults(t *testing.T) {
	cases := map[string]float64{"none": 0, "light": 0.05, "default": 0.12, "heavy": 0.3, "0": 0, "0.25": 0.25, "1": 1}
	for in, want := range cases {
		got, err := parseFaults(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, "parseFaults(%q)", in)
	}
	for _, in := range []string{"", "-0.1", "1.01", "half"} {
		_, err := parseFaults(in)
		assert.Error(t, err, "parseFaults(%q)", in)
	}
}

func TestWorkloadIsTheSeeds(t *testing.T) {
	a, b, c := workload(1, 1000), workload(1, 1000), workload(2, 1000)
	assert.Equal(t, a, b, "one seed, one workload")
	assert.NotEqual(t, a[0].id, c[0].id)
	ids, empty := map[string]bool{}, 0
	for _, op := range a {
		ids[op.id] = true
		assert.Len(t, op.id, 36, "a UUID")
		assert.True(t, op.amount >= 100 && op.amount < maxAmountCents, "amount %d", op.amount)
		if op.account == emptyAccount {
			empty++
		}
	}
	assert.Len(t, ids, 1000, "ids are unique")
	assert.InDelta(t, 20, empty, 15, "about one payment in 50 goes to the empty account")
}

func TestFaultRules(t *testing.T) {
	ops := workload(3, 2000)
	assert.Nil(t, faultRules(3, 0, time.Second, ops))
	rules := faultRules(3, 0.5, time.Second, ops)
	require.NoError(t, testserver.ValidateRules(rules))
	chaos := rules[len(rules)-1]
	var total float64
	for _, c := range chaos.Mix {
		total += c.P
	}
	assert.InDelta(t, 0.5, total, 1e-9, "the mix covers the rate")
	bursts := len(rules) - 1
	assert.InDelta(t, 2000*0.5*burstShare, bursts, 60, "bursts for about rate*burstShare of the payments")
	assert.Equal(t, rules[:bursts], faultRules(3, 0.5, time.Second, ops)[:bursts], "bursts depend on the seed only")
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	assert.Equal(t, time.Duration(6), percentile(ds, 50))
	assert.Equal(t, time.Duration(10), percentile(ds, 99))
	assert.Equal(t, time.Duration(0), percentile(nil, 50))
}

// The rerun hint is the whole command: parsed again, it gives the same
// options (the database URL without its password).
func TestRerunCommandHasEveryFlag(t *testing.T) {
	o := options{n: 2000, seed: 7, concurrency: 8, faults: "heavy", attemptTimeout: 300 * time.Millisecond,
		db: "postgres://demo:secret@127.0.0.1:5432/test?sslmode=disable"}
	cmd := o.command()
	assert.NotContains(t, cmd, "secret")
	args := strings.Fields(strings.TrimPrefix(cmd, "go run ./examples/payments "))
	for i, a := range args {
		args[i] = strings.Trim(a, "'")
	}
	got, err := parseFlags(args, io.Discard, func(string) string { return "" })
	require.NoError(t, err, cmd)
	want := o
	want.db = "postgres://demo:xxxxx@127.0.0.1:5432/test?sslmode=disable"
	assert.Equal(t, want, got, cmd)
}

// When the idem client is the slower one, the report says where its time
// went; when it is not, it says nothing.
func TestReportSaysWhyTheIdemClientIsSlower(t *testing.T) {
	idemc := column{elapsed: 9 * time.Second, waitedRetryAfter: 40 * time.Second, waitedOwn: 3 * time.Second, budgetDenied: 12}
	naive := column{elapsed: 2 * time.Second, waitedOwn: 5 * time.Second, report: testserver.Report{DoubleEffects: 266}}
	var b strings.Builder
	printWhySlower(&b, idemc, naive)
	assert.Contains(t, b.String(), "Why the idem client took longer (9s against 2s)")
	assert.Contains(t, b.String(), "it waited 43s before its retries: 40s honouring the server's Retry-After\n")
	assert.Contains(t, b.String(), "3s backing off")
	assert.Contains(t, b.String(), "refused 12 retries")
	assert.Contains(t, b.String(), "266 double payments")
	b.Reset()
	idemc.elapsed = time.Second
	printWhySlower(&b, idemc, naive)
	assert.Empty(t, b.String())
}

// Issue 26, point 6: against a slow store (each payment's store call takes
// about the attempt timeout, so about half the attempts time out; injected,
// not a loaded machine), the idem client completes at least as many
// payments as the naive client, and pays none twice.
func TestDemoOnASlowStore(t *testing.T) {
	o := shortRun(t)
	o.n, o.concurrency, o.attemptTimeout = 300, 16, 200*time.Millisecond
	o.storeLatency = o.attemptTimeout
	res, report := runDemo(t, o)
	assert.Equal(t, 0, res.exitCode())
	assert.Zero(t, res.idem.report.DoubleEffects)
	assert.GreaterOrEqual(t, res.idem.report.OK, res.naive.report.OK, "the idem client completes at least as many payments")
	assert.Positive(t, res.naive.report.DoubleEffects, "the naive client's timeouts pay twice")
	assert.Contains(t, report, "store memory (payments take 200ms, 0.8x to 1.2x)")
	assert.Regexp(t, `payments given up: deadline +\d+ +-\n`, report)
}

// When the idem client completes fewer payments than the naive one, the
// report says why, from its breaker and its payments given up; when it
// does not, it says nothing.
func TestReportSaysWhyTheIdemClientCompletedFewer(t *testing.T) {
	idemc := column{report: testserver.Report{OK: 40}, breakerTrips: 2, breakerNotClosed: 6 * time.Second,
		gaveUp: map[string]int{gaveUpBreaker: 30, gaveUpDeadline: 5}}
	naive := column{report: testserver.Report{OK: 90, DoubleEffects: 12}, breakerTrips: -1}
	var b strings.Builder
	printWhyFewer(&b, idemc, naive)
	assert.Equal(t, "Why the idem client completed fewer payments (40 against 90): its breaker opened 2 times and was open or probing for 6s in all, "+
		"the host failing the attempts that opened it; of its payments, 30 waited for the breaker and ran out of deadline, 5 reached their 8s deadline.\n"+
		"  None of them was paid twice; the naive client's extra payments cost 12 double payments.\n", b.String())

	var table strings.Builder
	printReport(&table, result{idem: idemc, naive: naive})
	assert.Regexp(t, `payments given up: breaker open +30 +-\n`, table.String())
	assert.Regexp(t, `  open or probing, in all +6s +-\n`, table.String())

	b.Reset()
	idemc.report.OK = 90
	printWhyFewer(&b, idemc, naive)
	assert.Empty(t, b.String())
}
