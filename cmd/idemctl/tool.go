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

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemredis"
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
		errors.Is(err, outbox.ErrPastRetention), errors.Is(err, errDeclined), errors.Is(err, server.ErrNotUncertain):
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
	outbox *outbox.Outbox // nil without -db
	in     *bufio.Reader
	// closeRecords closes -redis's client or -mysql's pool; nil without
	// them.
	closeRecords func() error
}

// connect opens the pool (when -db is set) and the records' store (the
// pool's, -redis's or -mysql's), and checks that they are reachable.
func connect(ctx context.Context, g globals, e env) (*tool, error) {
	quiet := slog.New(slog.DiscardHandler)
	var replay []string
	for _, name := range strings.Split(g.replayHeaders, ",") {
		if name = strings.TrimSpace(name); name != "" {
			replay = append(replay, name)
		}
	}
	t := &tool{g: g, e: e, in: bufio.NewReader(e.stdin)}
	if g.db != "" {
		if err := t.openDB(ctx, g, quiet); err != nil {
			return nil, err
		}
	}
	var records server.RecordStore
	var err error
	switch {
	case g.redis != "":
		records, t.closeRecords, err = openRedis(ctx, g)
	case g.mysql != "":
		records, t.closeRecords, err = openMySQL(ctx, g.mysql)
	default:
		records = server.NewPostgresStore(t.pool)
	}
	if err != nil {
		t.close()
		return nil, err
	}
	t.ops = server.NewOperator(records, server.OperatorConfig{ReplayHeaders: replay, Logger: quiet})
	return t, nil
}

// openDB opens the pool of -db and the outbox on it.
func (t *tool) openDB(ctx context.Context, g globals, logger *slog.Logger) error {
	pool, err := pgxpool.New(ctx, g.db)
	if err != nil {
		return fmt.Errorf("-db: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("cannot reach the database: %w", err)
	}
	t.pool = pool
	t.outbox, err = outbox.New(pool, outbox.Config{KeyRetention: g.keyRetention, Schema: g.outboxSchema, Logger: logger})
	if err != nil {
		pool.Close()
		return err
	}
	return nil
}

// openRedis opens the idemredis store of -redis, under -redis-prefix. It
// allows a server that may evict keys: an operator reads and evicts, and
// should see the records of such a server too.
func openRedis(ctx context.Context, g globals) (*idemredis.Store, func() error, error) {
	opts, err := redis.ParseURL(g.redis)
	if err != nil {
		return nil, nil, fmt.Errorf("-redis: %w", err)
	}
	c := redis.NewClient(opts)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("cannot reach Redis: %w", err)
	}
	s, err := idemredis.New(ctx, c, idemredis.Config{Prefix: g.redisPrefix, AllowEviction: true})
	if err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("-redis: %w", err)
	}
	return s, c.Close, nil
}

func (t *tool) close() {
	if t.pool != nil {
		t.pool.Close()
	}
	if t.closeRecords != nil {
		_ = t.closeRecords()
	}
}

// A database without the stores' tables (a wrong -db, search_path or
// -outbox-schema) is told by the stores themselves: their first statement
// fails with the database's error, which missingTable recognises by its
// SQLSTATE. idemctl names no table in SQL of its own.

// missingTable returns the database's message when err says that a table
// or a type it names does not exist (SQLSTATE 42P01 undefined_table, or
// 42704 undefined_object: River's job state type; MySQL's error 1146),
// and "" otherwise.
func missingTable(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42704") {
		return pgErr.Message
	}
	return mysqlMissingTable(err)
}

// noRecords is err, or a clear error when err says that the database has
// no idempotency records' table: the store of a record command reads only
// idem_records.
func noRecords(err error) error {
	if msg := missingTable(err); msg != "" {
		return fmt.Errorf("no idempotency records here: the database has no idem_records table in its search_path or -mysql's database (%s; server.Migrate or mysqlidem.Migrate creates it; check -db or -mysql)", msg)
	}
	return err
}

// noOutbox is err, or, when err says that the database has no outbox
// tables, an error that says so and that no message is found there.
func noOutbox(err error) error {
	if msg := missingTable(err); msg != "" {
		return fmt.Errorf("%w: no outbox here: %s (outbox.Migrate creates its tables; see -outbox-schema)", outbox.ErrUnknownMessage, msg)
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
