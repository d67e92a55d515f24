// Command outbox measures the transactional outbox (package outbox) on the
// database at DATABASE_URL, each mode in a schema of its own (dropped at
// the end), against loopback HTTP servers:
//
//	go run ./bench/outbox -mode payments    # POST /v1/payments with and without a message per payment
//	go run ./bench/outbox -mode deliver     # messages/s to a loopback receiver, 1 and 2 dispatchers
//	go run ./bench/outbox -mode steady      # the payment rate sustained with a dispatcher delivering,
//	                                        # with and without a message per payment
//	go run ./bench/outbox -mode latency     # commit -> receiver at a steady rate: p50, p99; and
//	                                        # commit -> worker through River alone (no HTTP), the bound
//	go run ./bench/outbox -mode headofline  # 10 messages to a healthy host, alone and behind a hanging
//	                                        # or failing host's (issue 28), and River alone's bound
//	go run ./bench/outbox -mode deadhost    # 2,000 messages to a host dead for 60 s: row updates/s,
//	                                        # messages parked (issue 26)
//	go run ./bench/outbox -mode migrate -schema S   # the outbox's tables in schema S (bench/pgbench-outbox.sh)
//
// Flags: -n (payments per round, or messages), -rounds, -concurrency
// (requests in flight), -rate (messages per second) and -duration (of the
// steady runs and of each step of -mode steady; deadhost: of the outage,
// 60 s), -dispatchers (deliver: 0 runs 1 then 2), -fetch-cooldown (the
// dispatchers' Config.FetchCooldown, and River's alone in latency),
// -gin-pending-limit (latency: the bound of the pending lists of River's
// GIN indexes in the outbox's rounds, in kB, in place of Migrate's; 4096
// is PostgreSQL's default).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/outbox"
)

type options struct {
	mode, schema                       string
	n, rounds, concurrency, dispatcher int
	rate                               int
	seconds, cooldown                  time.Duration
	ginLimit                           int
}

// messages is how many messages a steady run commits: -rate for -duration.
func (o options) messages() int { return int(o.seconds.Seconds() * float64(o.rate)) }

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "latency", "payments, deliver, steady, latency, headofline, deadhost or migrate")
	flag.StringVar(&o.schema, "schema", "", "the schema (migrate mode)")
	flag.IntVar(&o.n, "n", 0, "payments per round (payments: 4000), messages (deliver: 10000)")
	flag.IntVar(&o.rounds, "rounds", 4, "alternating rounds (payments, latency)")
	flag.IntVar(&o.concurrency, "concurrency", 16, "requests in flight (payments)")
	flag.IntVar(&o.dispatcher, "dispatchers", 0, "dispatchers (deliver; 0: 1, then 2)")
	flag.IntVar(&o.rate, "rate", 500, "messages per second (latency)")
	flag.DurationVar(&o.seconds, "duration", 10*time.Second, "length of a steady run (latency)")
	flag.DurationVar(&o.cooldown, "fetch-cooldown", 0, "the outbox's Config.FetchCooldown (0: its default)")
	flag.IntVar(&o.ginLimit, "gin-pending-limit", 0, "kB: the pending list bound of River's GIN indexes (latency; 0: Migrate's, 128)")
	flag.Parse()
	if o.mode == "deadhost" && !flagSet("duration") {
		o.seconds = time.Minute
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "outbox bench:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "outbox bench:", err)
		os.Exit(1)
	}
}

// check refuses flags that would measure nothing or print a wrong figure,
// naming the flag.
func (o options) check() error {
	switch {
	case !slices.Contains([]string{"payments", "deliver", "steady", "latency", "headofline", "deadhost", "migrate"}, o.mode):
		return fmt.Errorf("-mode must be payments, deliver, steady, latency, headofline, deadhost or migrate, got %q", o.mode)
	case o.mode == "migrate" && o.schema == "":
		return errors.New("-schema is required with -mode migrate")
	case o.n < 0:
		return fmt.Errorf("-n must not be negative, got %d", o.n)
	case o.rounds < 1:
		return fmt.Errorf("-rounds must be at least 1, got %d", o.rounds)
	case o.concurrency < 1:
		return fmt.Errorf("-concurrency must be at least 1, got %d", o.concurrency)
	case o.dispatcher < 0:
		return fmt.Errorf("-dispatchers must not be negative, got %d", o.dispatcher)
	case o.rate < 1:
		return fmt.Errorf("-rate must be at least 1, got %d", o.rate)
	case o.ginLimit != 0 && o.ginLimit < 64:
		return fmt.Errorf("-gin-pending-limit must be at least 64 (kB, PostgreSQL's least), got %d", o.ginLimit)
	case o.cooldown < 0:
		return fmt.Errorf("-fetch-cooldown must not be negative, got %s", o.cooldown)
	case o.mode == "steady" && o.seconds < time.Second:
		return fmt.Errorf("-duration must be at least 1s with -mode steady, got %s", o.seconds)
	case o.mode == "latency" && o.messages() < 1:
		return fmt.Errorf("-rate x -duration must be at least one message, got %d/s for %s", o.rate, o.seconds)
	case o.mode == "deadhost" && o.seconds < 10*time.Second:
		return fmt.Errorf("-duration must be at least 10s with -mode deadhost (the first 5 s are reported apart), got %s", o.seconds)
	}
	return nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func run(ctx context.Context, o options) error {
	raw := os.Getenv("DATABASE_URL")
	if raw == "" {
		return fmt.Errorf("set DATABASE_URL")
	}
	if o.mode == "migrate" {
		return migrateSchema(ctx, raw, o.schema)
	}
	schema := "idem_bench_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	if err := exec(ctx, raw, "CREATE SCHEMA "+schema); err != nil {
		return err
	}
	defer func() { _ = exec(context.Background(), raw, "DROP SCHEMA "+schema+" CASCADE") }()
	dbURL := withSearchPath(raw, schema)
	switch o.mode {
	case "payments":
		return benchPayments(ctx, dbURL, o)
	case "deliver":
		return benchDeliver(ctx, dbURL, o)
	case "steady":
		return benchSteady(ctx, dbURL, o)
	case "headofline":
		return benchHeadOfLine(ctx, dbURL, o)
	case "deadhost":
		return benchDead(ctx, dbURL, o)
	}
	return benchLatencies(ctx, dbURL, o)
}

func exec(ctx context.Context, raw, sql string) error {
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func withSearchPath(raw, schema string) string {
	u, _ := url.Parse(raw)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// migratedPool opens a pool of conns connections on a database holding
// the outbox's tables.
func migratedPool(ctx context.Context, dbURL string, conns int) (*pgxpool.Pool, error) {
	pool, err := openPool(ctx, dbURL, conns)
	if err != nil {
		return nil, err
	}
	if err := outbox.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// openPool opens a pool of conns connections.
func openPool(ctx context.Context, dbURL string, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(conns)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// or returns n, or def when n is zero.
func or(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
