// Command scale measures the middleware as its records table grows (issue
// 20): the payments example (examples/payments/api, POST /v1/payments on
// PostgresBackend, loopback) with and without the middleware, in the same
// run, at several sizes of idem_records and several requests in flight;
// then, at the largest size, the sweeper keeping up with arrivals, the
// replay path and a duplicate storm on one key.
//
//	go run ./bench/scale                                    # 0 and 100,000 records, about 2 minutes
//	go run ./bench/scale -sizes 0,1000000,10000000 -duration 60s \
//	    -sweep 10m -sweep-retention 2m                      # the issue's run
//
// By default it starts a private cluster (initdb in a temporary directory,
// -port, autovacuum on, removed at exit; as root initdb and the server run
// as the postgres user), so that autovacuum works as in production and no
// other test is disturbed. With -db it uses that database instead, in a
// schema of its own dropped at the end, with that cluster's autovacuum.
//
// The phases:
//   - fill: records are generated in SQL, clones of one real payment's
//     record with their own scope, key, fingerprint and token, their
//     expiries spread evenly over the next 24 hours; then VACUUM ANALYZE
//     and a checkpoint.
//   - ratio, per size and in-flight count: turns of -chunk requests in the
//     order plain, idem, idem, plain, ... (as BenchmarkPaymentOverhead
//     does), plain without an Idempotency-Key (the API's KeyOptional: the
//     handler runs without the middleware), idem with a new key each, for
//     -duration; req/s of each, their ratio, p50 and p99 latency.
//   - sweep, at the largest size: the same turns against an API whose
//     records are kept for -sweep-retention, so that after that long
//     expiries balance arrivals, while server.RunSweeper runs on a pool
//     of its own (another node); a row every -sample.
//   - replay and storm, at the largest size: p50 and p99.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"
)

// config is the program's flags.
type config struct {
	db                   string
	port                 int
	sizes, inflight      []int
	duration             time.Duration
	chunk, conns         int
	sweep, sweepKeep     time.Duration
	sweepEvery, sample   time.Duration
	sweepInflight        int
	sweepBatch           int
	vacuumScale          float64
	pgOptions            string
	storms, storm, reply int
}

func main() {
	var c config
	var sizes, inflight string
	flag.StringVar(&c.db, "db", "", "Postgres `URL` to use, in a schema of its own, instead of a private cluster (DATABASE_URL is not read: the figures come from the private cluster unless a URL is named)")
	flag.IntVar(&c.port, "port", 55432, "the private cluster's port")
	flag.StringVar(&c.pgOptions, "pg-options", "", "more `options` for the private cluster's server, as for postgres (\"-c shared_buffers=2GB\")")
	flag.StringVar(&sizes, "sizes", "0,100000", "records in the table, comma-separated, ascending")
	flag.StringVar(&inflight, "inflight", "4,16", "requests in flight, comma-separated")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "measurement per size and in-flight count")
	flag.IntVar(&c.chunk, "chunk", 500, "requests per turn of a variant")
	flag.IntVar(&c.conns, "conns", 24, "the API's pool size")
	flag.DurationVar(&c.sweep, "sweep", 30*time.Second, "the sweep phase's length (0: none)")
	flag.DurationVar(&c.sweepKeep, "sweep-retention", 10*time.Second, "the retention of the records made in the sweep phase")
	flag.DurationVar(&c.sweepEvery, "sweep-interval", 10*time.Second, "SweepConfig.Interval")
	flag.DurationVar(&c.sample, "sample", 10*time.Second, "the sweep phase's sampling period")
	flag.IntVar(&c.sweepInflight, "sweep-inflight", 16, "requests in flight in the sweep phase")
	flag.IntVar(&c.sweepBatch, "sweep-batch", 0, "SweepConfig.Batch (0: the default)")
	flag.Float64Var(&c.vacuumScale, "autovacuum-scale", 0, "idem_records's autovacuum_vacuum_scale_factor and _insert_scale_factor (0: the cluster's, 0.2)")
	flag.IntVar(&c.storms, "storms", 5, "duplicate storms (0: none)")
	flag.IntVar(&c.storm, "storm", 1000, "concurrent requests with one key in a storm")
	flag.IntVar(&c.reply, "replays", 5000, "requests of the replay measurement (0: none)")
	flag.Parse()
	if err := c.parse(sizes, inflight); err != nil || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "scale:", cmp.Or(err, fmt.Errorf("unexpected arguments %q", flag.Args())))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		stop()
		os.Exit(1)
	}
}

// parse sets the lists of sizes and in-flight counts and checks every
// flag, saying which one is wrong.
func (c *config) parse(sizes, inflight string) error {
	var err error
	if c.sizes, err = ints(sizes); err != nil {
		return fmt.Errorf("-sizes: %w", err)
	}
	if c.inflight, err = ints(inflight); err != nil {
		return fmt.Errorf("-inflight: %w", err)
	}
	switch {
	case !slices.IsSorted(c.sizes):
		return errors.New("-sizes must be ascending")
	case slices.Min(c.inflight) == 0:
		return errors.New("-inflight counts must be positive")
	case c.duration <= 0 || c.chunk <= 0 || c.conns <= 0 || c.sweepInflight <= 0 || c.sample <= 0:
		return errors.New("-duration, -chunk, -conns, -sweep-inflight and -sample must be positive")
	case c.sweep > 0 && (c.sweepKeep <= 0 || c.sweepEvery <= 0):
		return errors.New("-sweep-retention and -sweep-interval must be positive when -sweep is")
	case c.sweep < 0 || c.sweepBatch < 0 || c.vacuumScale < 0 || c.storms < 0 || c.reply < 0:
		return errors.New("-sweep, -sweep-batch, -autovacuum-scale, -storms and -replays must not be negative")
	case c.storms > 0 && c.storm <= 0:
		return errors.New("-storm must be positive when -storms is")
	case c.db != "" && c.pgOptions != "":
		return errors.New("-pg-options applies to the private cluster, not to -db")
	}
	return nil
}

// ints parses a comma-separated list of non-negative integers.
func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a non-negative integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
