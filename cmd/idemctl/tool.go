package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// Errors of the commands, beside the APIs' own.
var (
	// errUsage: bad flags or arguments (already reported).
	errUsage = errors.New("usage")
	// errReported: the command reported its outcome itself.
	errReported = errors.New("reported")
	// errDeclined: the operator did not confirm.
	errDeclined = errors.New("not confirmed: nothing changed (pass -yes to skip the question)")
)

// exitStatus maps a command's error to the exit status.
func exitStatus(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp), errors.Is(err, server.ErrBadScope):
		return exitUsage
	case errors.Is(err, server.ErrUnknownKey), errors.Is(err, outbox.ErrUnknownMessage):
		return exitNotFound
	case errors.Is(err, server.ErrLeaseLive), errors.Is(err, outbox.ErrNotParked),
		errors.Is(err, outbox.ErrPastRetention), errors.Is(err, errDeclined):
		return exitRefused
	}
	return exitFailed
}

// tool is a connected idemctl.
type tool struct {
	g      globals
	e      env
	pool   *pgxpool.Pool
	ops    *server.Operator
	outbox *outbox.Outbox
	in     *bufio.Reader
}

// connect opens the pool and checks that it reaches the database.
func connect(ctx context.Context, g globals, e env) (*tool, error) {
	pool, err := pgxpool.New(ctx, g.db)
	if err != nil {
		return nil, fmt.Errorf("-db: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach the database: %w", err)
	}
	quiet := slog.New(slog.DiscardHandler)
	var replay []string
	for _, name := range strings.Split(g.replayHeaders, ",") {
		if name = strings.TrimSpace(name); name != "" {
			replay = append(replay, name)
		}
	}
	t := &tool{g: g, e: e, pool: pool, in: bufio.NewReader(e.stdin),
		ops: server.NewOperator(server.NewPostgresStore(pool), server.OperatorConfig{ReplayHeaders: replay, Logger: quiet})}
	t.outbox, err = outbox.New(pool, outbox.Config{KeyRetention: g.keyRetention, Schema: g.outboxSchema, Logger: quiet})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return t, nil
}

func (t *tool) close() { t.pool.Close() }

// hasTable reports whether the search_path (or schema) holds table.
func (t *tool) hasTable(ctx context.Context, schema, table string) (bool, error) {
	name := table
	if schema != "" {
		name = schema + "." + table
	}
	var ok bool
	err := t.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok)
	return ok, err
}

// needRecords fails with a clear error when the idempotency records'
// table is missing: -db names another database, or its search_path
// another schema.
func (t *tool) needRecords(ctx context.Context) error {
	ok, err := t.hasTable(ctx, "", "idem_records")
	if err == nil && !ok {
		err = errors.New("no idempotency records here: the database has no idem_records table in its search_path (server.Migrate creates it; check -db)")
	}
	return err
}

// needOutbox fails with a clear error when the outbox's tables are missing.
func (t *tool) needOutbox(ctx context.Context) error {
	ok, err := t.hasTable(ctx, t.g.outboxSchema, "river_job")
	if err == nil && !ok {
		err = errors.New("no outbox here: the database has no river_job table (outbox.Migrate creates it; see -outbox-schema)")
	}
	return err
}

// confirm asks question on stderr and reads the answer from stdin: only
// "yes" confirms.
func (t *tool) confirm(question string) error {
	fmt.Fprintf(t.e.stderr, "%s\nType yes to go on: ", question)
	line, err := t.in.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if strings.TrimSpace(line) != "yes" {
		return errDeclined
	}
	return nil
}

// flags is a command's flag set, whose errors go to stderr.
func (t *tool) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("idemctl "+name, flag.ContinueOnError)
	fs.SetOutput(t.e.stderr)
	return fs
}

// parse parses args with fs and checks the number of arguments left
// (want -1: any).
func parse(fs *flag.FlagSet, args []string, want int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if want >= 0 && fs.NArg() != want {
		fmt.Fprintf(fs.Output(), "%s: want %d argument(s), got %d\n", fs.Name(), want, fs.NArg())
		return errUsage
	}
	return nil
}

// scopeFlags adds the flags that name a record's scope.
func scopeFlags(fs *flag.FlagSet) *server.Operation {
	op := &server.Operation{}
	fs.StringVar(&op.Tenant, "tenant", "", "the record's tenant (server.Config.Scope)")
	fs.StringVar(&op.Principal, "principal", "", "the record's principal")
	fs.StringVar(&op.Route, "route", "", `the route, as the middleware names it ("POST /v1/payments")`)
	return op
}
