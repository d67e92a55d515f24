// Command payments is the idem demo: one screen that shows why idempotency
// keys exist.
//
//	go run ./examples/payments
//
// In one process and with no setup, it runs the payments API of package
// examples/payments/api (in memory; on Postgres with -db or DATABASE_URL)
// behind a testserver that injects a seeded mix of faults: responses
// dropped after the payment committed (drop-close, drop-reset), a 502
// instead of the 201 (status-after), bodies cut short (partial-body),
// responses delayed past the client's timeout (delay-response),
// connections reset before the request is read (reset), and 503s with
// Retry-After, alone and in bursts of two for one payment.
//
// Then it makes the same N payments twice, each client meeting the same
// faults (a fault is drawn from the seed, the payment and the attempt):
//
//   - the idem client: idem.NewClient, one Idempotency-Key per payment,
//     retries inside a deadline, a retry budget and a circuit breaker;
//   - a naive client: http.Client with a timeout, retrying any error or
//     5xx a few times, without a key.
//
// testserver.Check compares what each client concluded with the payments
// the API really made, and the demo prints both columns side by side:
// attempts, faults, payments made, double payments, lost and unknown
// outcomes, budget denials, breaker trips, latency. The idem column must
// show no double payment and no lost ok; the naive column shows what the
// faults do without keys.
//
// Flags:
//
//	-n                 payments per client (default 3000)
//	-seed              the seed of the faults and payments (default: from the clock; printed)
//	-concurrency       payments in flight at once (default 32)
//	-faults            the share of attempts that meet a fault, 0 to 1, or
//	                   none, light (0.05), default (0.12), heavy (0.3)
//	-db                Postgres URL (default $DATABASE_URL; empty: in memory)
//	-mysql             a MySQL or MariaDB DSN (user:pass@tcp(host:3306)/db): the
//	                   payments and their records go there (mysqlidem), instead
//	                   of -db; no outbox runs there, so no notifications
//	-attempt-timeout   the clients' bound on each attempt (default 500ms)
//	-store-latency     make each payment's store call take about this long
//	                   (0.8x to 1.2x), as a loaded machine's store does (default 0)
//
// The exit status is 1 when the idem column has any violation (a double
// payment, a lost ok, ...), 2 for bad flags. While it runs, stderr shows
// its progress (the payments made, then the notifications delivered): on
// a terminal one line that redraws itself, elsewhere a line every 5 s. The naive column's double
// payments are expected: they are printed, not failed on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"time"

	"github.com/idemkit/idem/examples/payments/internal/mysqlopen"
	"github.com/idemkit/idem/internal/dbflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	o, err := parseFlags(os.Args[1:], os.Stderr, os.Getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case err != nil:
		os.Exit(2)
	}
	res, err := run(ctx, o, os.Stdout, newProgress(os.Stderr))
	if err != nil {
		fmt.Fprintln(os.Stderr, "payments:", err)
		os.Exit(1)
	}
	os.Exit(res.exitCode())
}

// options are the demo's flags.
type options struct {
	n, concurrency int
	seed           uint64
	faults         string
	db             string
	// mysql is the DSN of MySQL or MariaDB storage; it replaces db.
	mysql          string
	attemptTimeout time.Duration
	// storeLatency, when positive, makes every payment's store call take
	// about that long: a slow store, as on a loaded machine.
	storeLatency time.Duration

	// stripKeys makes the API ignore Idempotency-Key (tests only): the
	// idem column then shows double payments, and the exit status says so.
	stripKeys bool
}

// command is the command line that runs the demo again with o's flags,
// all of them (the seed included), the database URL without its password.
func (o options) command() string {
	cmd := fmt.Sprintf("go run ./examples/payments -n %d -seed %d -concurrency %d -faults %s -attempt-timeout %s",
		o.n, o.seed, o.concurrency, o.faults, o.attemptTimeout)
	if o.storeLatency > 0 {
		cmd += " -store-latency " + o.storeLatency.String()
	}
	if o.mysql != "" {
		return cmd + " -mysql '" + mysqlopen.Redact(o.mysql) + "'"
	}
	if o.db != "" {
		db := o.db
		if u, err := url.Parse(o.db); err == nil {
			db = u.Redacted()
		}
		cmd += " -db '" + db + "'"
	}
	return cmd
}

func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", 3000, "payments per client")
	fs.Uint64Var(&o.seed, "seed", uint64(time.Now().UnixNano()%1_000_000), "seed of the faults and the payments")
	fs.IntVar(&o.concurrency, "concurrency", 32, "payments in flight at once")
	fs.StringVar(&o.faults, "faults", "default", "share of attempts that meet a fault (0 to 1), or none, light, default, heavy")
	dbflag.Var(fs, &o.db, getenv, dbflag.Memory)
	fs.DurationVar(&o.attemptTimeout, "attempt-timeout", 500*time.Millisecond, "the clients' bound on each attempt")
	fs.DurationVar(&o.storeLatency, "store-latency", 0, "make each payment's store call take about this long (0.8x to 1.2x), as a loaded machine's store does; 0: as fast as it is")
	fs.StringVar(&o.mysql, "mysql", "", "MySQL or MariaDB `DSN` (user:pass@tcp(host:3306)/db) of the payments and their records, instead of -db; no notifications there")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	_, err := parseFaults(o.faults)
	switch {
	case o.mysql != "" && o.db != "" && explicit(fs, "db"):
		err = errors.New("-db and -mysql name two databases: pass one")
	case fs.NArg() > 0:
		err = errors.New("no arguments are taken")
	case o.n < 1 || o.concurrency < 1 || o.attemptTimeout <= 0:
		err = errors.New("-n, -concurrency and -attempt-timeout must be positive")
	case o.storeLatency < 0:
		err = errors.New("-store-latency must not be negative")
	}
	if err != nil {
		fmt.Fprintln(stderr, "payments:", err)
		fs.Usage()
	}
	if o.mysql != "" {
		o.db = "" // $DATABASE_URL's default: the payments go to MySQL
	}
	return o, err
}

// explicit reports whether the flag name was set on the command line.
func explicit(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
