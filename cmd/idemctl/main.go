// Command idemctl answers an operator's questions about a service that runs
// idem on Postgres: what became of a key, what is in flight or stuck, which
// outbox messages were parked, and it evicts a record or re-drives a
// message.
//
//	idemctl [-db URL] [-json] <command> [flags] [args]
//
//	key      [-route R [-tenant T] [-principal P] [-payload]] KEY look a record up; the key alone lists every scope that holds it
//	inflight [-stuck] [-route R] [-limit N] [-after POS]          the operations in flight, oldest first
//	evict    -route R [-tenant T] [-principal P] [-force] [-yes] KEY
//	resolve  -route R [-tenant T] [-principal P] -by WHO -reason WHY (-applied -status N [-body B] | -not-applied) [-yes] KEY
//	                                                              settle an uncertain operation
//	parked   [-after ID] [-limit N]                               the outbox's parked messages
//	message  ID | -key K                                          one outbox message, in any state
//	redrive  [-past-retention] [-yes] ID                          send a parked message again
//	stats                                                         counts of records and messages
//
// The database is -db, or DATABASE_URL; the tables are those of the URL's
// search_path ([server.Migrate]'s idem_records, River's river_job). With
// -redis, the records are an [idemredis.Store]'s (under -redis-prefix);
// with -mysql DSN, a [mysqlidem.Store]'s on MySQL or MariaDB (the DSN's
// database holds its idem_records table); either way -db is needed only
// by the outbox's commands.
// -key-retention must be the dispatchers' [outbox.Config.KeyRetention]
// (default 24h): redrive refuses a message a delivery of which may have
// taken effect longer ago. -replay-headers names the routes'
// [server.Config.ReplayHeaders], shown with -payload; Set-Cookie,
// authentication and connection headers are never shown.
//
// A route is named as the middleware names it, with its method ("POST
// /v1/orders"): one typed without ("/v1/orders") is refused (exit 2).
// stats counts the records exactly up to 10,000, and past that says
// "about N" (the planner's estimate) or "more than 10000" (no estimate
// yet). parked on a database without an outbox says so and exits 0.
//
// Output is a table for people, or JSON with -json: every command's
// fields in snake_case, instants in RFC 3339, durations in seconds (names
// ending in _seconds), a body as text in "body" when it is UTF-8 text, in
// "body_base64" only when it is not. Stored text (a scope,
// a header, a body, a downstream's answer) never reaches the terminal raw:
// its control characters are escaped (\x1b, \t, \u202e), and a binary
// body is shown as its size and a hex dump. Exit status: 0 done;
// 1 the database or the outbox failed (or the database has no
// idem_records table: a wrong -db or search_path); 2 bad usage or a bad
// scope (nothing read or changed); 3 not found (no record for the key, no
// such message, no outbox); 4 refused, nothing changed (a live lease without
// -force, a message not parked or past its key retention without
// -past-retention, or a confirmation not given).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemkit/idem/internal/dbflag"
	"github.com/idemkit/idem/internal/opsview"
)

// The exit statuses.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitNotFound = 3
	exitRefused  = 4
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}

// env is the program's world, for tests.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// globals are the flags before the command.
type globals struct {
	db            string
	json          bool
	timeout       time.Duration
	keyRetention  time.Duration
	outboxSchema  string
	replayHeaders string
	redis         string // the records' Redis URL; "" reads them from -db
	redisPrefix   string
	mysql         string // the records' MySQL DSN; "" reads them from -db
}

// command is one of idemctl's commands: it parses its flags from args and
// runs against a connected tool. explain turns the error of a store that
// finds no table of its own into one that says so (noRecords, noOutbox).
type command struct {
	name, usage string
	run         func(ctx context.Context, t *tool, args []string) error
	explain     func(error) error
}

// needsDB reports whether c reads the Postgres database whatever store
// keeps the records: the outbox's commands.
func (c *command) needsDB() bool {
	return c.name == "parked" || c.name == "message" || c.name == "redrive"
}

var commands = []command{
	{"key", "[-route R [-tenant T] [-principal P] [-payload]] KEY | -ref [-payload] REF", runKey, noRecords},
	{"inflight", "[-stuck] [-route R] [-limit N] [-after POS]", runInFlight, noRecords},
	{"evict", "-route R [-tenant T] [-principal P] [-force] [-yes] KEY", runEvict, noRecords},
	{"resolve", "-route R [-tenant T] [-principal P] -by WHO -reason WHY (-applied -status N [-body B] | -not-applied) [-yes] KEY", runResolve, noRecords},
	{"parked", "[-after ID] [-limit N]", runParked, noOutbox},
	{"message", "ID | -key K", runMessage, noOutbox},
	{"redrive", "[-past-retention] [-yes] ID", runRedrive, noOutbox},
	{"stats", "", runStats, noRecords},
}

// run is the program; it returns the exit status.
func run(ctx context.Context, args []string, e env) int {
	g, rest, err := parseGlobals(args, e)
	if err != nil {
		return exitUsage
	}
	if len(rest) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == rest[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(e.stderr, "idemctl: unknown command %q\n", rest[0])
		usage(e.stderr)
		return exitUsage
	}
	if g.db == "" && (g.redis == "" && g.mysql == "" || cmd.needsDB()) {
		fmt.Fprintln(e.stderr, "idemctl: no database: set -db or DATABASE_URL")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	t, err := connect(ctx, g, e)
	if err != nil {
		fmt.Fprintln(e.stderr, "idemctl:", err)
		return exitFailed
	}
	defer t.close()
	err = cmd.explain(cmd.run(ctx, t, rest[1:]))
	if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errReported) && !errors.Is(err, errUsage) {
		fmt.Fprintln(e.stderr, "idemctl:", opsview.Text(err.Error()))
	}
	return exitStatus(err)
}

func parseGlobals(args []string, e env) (globals, []string, error) {
	g := globals{}
	fs := flag.NewFlagSet("idemctl", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { usage(e.stderr); fs.PrintDefaults() }
	dbflag.Var(fs, &g.db, e.getenv, dbflag.Required)
	fs.BoolVar(&g.json, "json", false, "print JSON instead of a table")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "bound on the whole command")
	fs.DurationVar(&g.keyRetention, "key-retention", 24*time.Hour, "the dispatchers' outbox Config.KeyRetention")
	fs.StringVar(&g.outboxSchema, "outbox-schema", "", "the outbox's Config.Schema (default: the search_path's)")
	fs.StringVar(&g.replayHeaders, "replay-headers", "", "comma-separated server.Config.ReplayHeaders of the routes")
	fs.StringVar(&g.redis, "redis", "", "read the records from this Redis `URL` (redis://host:6379/0), an idemredis.Store's, instead of -db")
	fs.StringVar(&g.redisPrefix, "redis-prefix", "", "the idemredis.Config.Prefix of the records (default idem)")
	fs.StringVar(&g.mysql, "mysql", "", "read the records from this MySQL or MariaDB `DSN` (user:pass@tcp(host:3306)/db), a mysqlidem.Store's, instead of -db")
	if err := fs.Parse(args); err != nil {
		return g, nil, err
	}
	if g.redis != "" && g.mysql != "" {
		fmt.Fprintln(e.stderr, "idemctl: -redis and -mysql name two stores of records: pass one")
		return g, nil, errUsage
	}
	if g.timeout <= 0 || g.keyRetention <= 0 {
		fmt.Fprintln(e.stderr, "idemctl: -timeout and -key-retention must be positive")
		return g, nil, errUsage
	}
	return g, fs.Args(), nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: idemctl [-db URL] [-json] <command> [flags] [args]")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.usage)
	}
}
