// Command dispatcher delivers the payments API's outbox: the payment.created
// notifications that POST /v1/payments enqueues in its transaction (see
// package outbox). Run one or several beside the API servers, on the same
// database:
//
//	go run ./examples/payments/receiver -addr 127.0.0.1:8090
//	go run ./examples/payments/dispatcher -db postgres://...
//
// Several dispatchers may run at once: each message is delivered by one of
// them at a time, and a message whose dispatcher was killed is delivered
// again, with the same Idempotency-Key, once -rescue-after has passed (see
// outbox.Config.RescueAfter). It applies the outbox's schema, prints
//
//	payments dispatcher: running
//
// to stdout once it dispatches, and stops gracefully on SIGINT or SIGTERM
// (the deliveries running finish, within -timeout).
//
// -db defaults to $DATABASE_URL. Flags -timeout, -rescue-after, -poll,
// -workers, -max-attempts, -min-backoff and -max-backoff set the
// outbox.Config fields of the same names (zero: the outbox's defaults,
// which -h prints); -attempt-timeout bounds each HTTP
// attempt of the idem client; -name adds "X-Dispatcher: <name>" to its
// deliveries, so that tests can tell the dispatchers apart. A test switch,
// never to set in production: IDEM_TRACE_FILE appends each delivery and
// re-drive of the outbox to that file (internal/trace).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/dbflag"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/outbox"
)

type options struct {
	db, name       string
	cfg            outbox.Config
	attemptTimeout time.Duration
}

// errUsage: the flags are wrong (already reported).
var errUsage = errors.New("usage")

// parseFlags reads the flags; -h prints every flag with its default, and
// says which zero means the outbox's default (outbox.Config's fields).
func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("dispatcher", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: dispatcher [flags]\n\nDelivers the payments API's outbox until SIGINT or SIGTERM. Flags:")
		fs.PrintDefaults()
	}
	dbflag.Var(fs, &o.db, getenv, dbflag.Required)
	fs.StringVar(&o.name, "name", "", "sent as X-Dispatcher on every delivery (empty: no such header)")
	fs.DurationVar(&o.cfg.Timeout, "timeout", 0, "bound of one delivery (0: the outbox's default, 30s)")
	fs.DurationVar(&o.cfg.RescueAfter, "rescue-after", 0, "a message being delivered for longer is taken as abandoned (0: the outbox's default, -timeout + 30s)")
	fs.DurationVar(&o.cfg.PollInterval, "poll", 0, "poll interval when no notification arrives (0: the outbox's default, 1s)")
	fs.IntVar(&o.cfg.Workers, "workers", 0, "deliveries at once per queue (0: the outbox's default, 20)")
	fs.IntVar(&o.cfg.MaxAttempts, "max-attempts", 0, "deliveries before a message is parked (0: the outbox's default, 25)")
	fs.DurationVar(&o.cfg.MinBackoff, "min-backoff", 0, "least backoff ceiling between deliveries (0: the outbox's default, 1s)")
	fs.DurationVar(&o.cfg.MaxBackoff, "max-backoff", 0, "greatest backoff between deliveries (0: the outbox's default, 5m0s)")
	fs.DurationVar(&o.attemptTimeout, "attempt-timeout", 2*time.Second, "bound of each HTTP attempt")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errUsage
	}
	if fs.NArg() > 0 || o.db == "" {
		fmt.Fprintln(stderr, "payments dispatcher: -db (or DATABASE_URL) is required, and no arguments are taken")
		fs.Usage()
		return o, errUsage
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr, os.Getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case err != nil:
		os.Exit(2)
	}
	if err := trace.FromEnv(os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "payments dispatcher:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "payments dispatcher:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	pool, err := pgxpool.New(ctx, o.db)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := outbox.Migrate(ctx, pool); err != nil {
		return err
	}
	o.cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o.cfg.Client = idem.Config{AttemptTimeout: o.attemptTimeout, Base: named(o.name, o.cfg.Workers)}
	ob, err := outbox.New(pool, o.cfg)
	if err != nil {
		return err
	}
	fmt.Println("payments dispatcher: running")
	return ob.Run(ctx)
}

// named returns the base transport, which adds X-Dispatcher: name to each
// request; nil (the outbox's own, see outbox.Config.Client) without a
// name. Like the outbox's, it keeps an idle connection per worker.
func named(name string, workers int) http.RoundTripper {
	if name == "" {
		return nil
	}
	if workers <= 0 {
		workers = 20 // outbox.Config.Workers's default
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = workers
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Dispatcher", name)
		return base.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
