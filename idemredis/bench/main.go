// Command bench measures, side by side in one run, a Leased operation's
// claim and completion ([server.Store]'s Claim, then the attempt's
// Complete) at a number of operations in flight, on three subjects:
//
//   - postgres: [server.PostgresStore] on DATABASE_URL (-db), in a schema of
//     its own that it drops at the end;
//   - redis: [idemredis.Store] on the Redis at -redis;
//   - redis-bound: the same two Lua scripts (the store's claim and
//     complete, idemredis/internal/lua) through a bare go-redis loop with
//     the same arguments, and nothing of the store around them: the most
//     the store could do on this Redis.
//
// For each it prints the throughput and the p50 and p99 latency of one
// claim plus completion:
//
//	cd idemredis && go run ./bench -ops 20000 -concurrency 16 -rounds 3
//
// The subjects take turns, round after round, so that a noisy neighbour
// on the machine weighs on all three alike; each one's median round is
// printed.
// Every key is new (no replays). The Redis records expire a minute after
// the run (their retention); the Postgres schema is dropped.
package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemredis"
	"github.com/idemkit/idem/idemredis/internal/lua"
	"github.com/idemkit/idem/internal/dbflag"
	"github.com/idemkit/idem/server"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	ops, concurrency, rounds int
	redisAddr, db            string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.ops, "ops", 20000, "operations per subject")
	fs.IntVar(&o.concurrency, "concurrency", 16, "operations in flight")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds: the subjects take turns, and each one's median round is printed")
	fs.StringVar(&o.redisAddr, "redis", envOr("REDIS_ADDR", "127.0.0.1:6379"), "Redis `address`")
	dbflag.Var(fs, &o.db, os.Getenv, dbflag.Required)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.db == "" || o.ops <= 0 || o.concurrency <= 0 || o.rounds <= 0 {
		return errors.New("-db (or DATABASE_URL) is required, and -ops, -concurrency and -rounds must be positive")
	}
	rdb := redis.NewClient(&redis.Options{Addr: o.redisAddr, PoolSize: 2 * o.concurrency})
	defer rdb.Close()
	pgStore, drop, err := postgresStore(ctx, o.db, o.concurrency)
	if err != nil {
		return err
	}
	defer drop()
	prefix := "idembench-" + uuid.NewString()[:8]
	redisStore, err := idemredis.New(ctx, rdb, idemredis.Config{Prefix: prefix})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Leased claim+complete, %d operations a round, %d in flight, median of %d rounds\n\n", o.ops, o.concurrency, o.rounds)
	fmt.Fprintf(out, "%-12s %12s %10s %10s\n", "subject", "ops/s", "p50", "p99")
	subjects := []struct {
		name string
		op   func(ctx context.Context, i int) error
	}{
		{"postgres", storeOp(pgStore, "pg")},
		{"redis", storeOp(redisStore, "redis")},
		{"redis-bound", boundOp(rdb, prefix)},
	}
	rounds := make([][]result, len(subjects))
	for range o.rounds {
		for i, sub := range subjects {
			r, err := measure(ctx, o, sub.op)
			if err != nil {
				return fmt.Errorf("%s: %w", sub.name, err)
			}
			rounds[i] = append(rounds[i], r)
		}
	}
	for i, sub := range subjects {
		slices.SortFunc(rounds[i], func(a, b result) int { return cmp.Compare(a.rate, b.rate) })
		r := rounds[i][len(rounds[i])/2]
		fmt.Fprintf(out, "%-12s %12.0f %10s %10s\n", sub.name, r.rate, r.p50, r.p99)
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// postgresStore is a PostgresStore in a fresh schema; drop drops it.
func postgresStore(ctx context.Context, url string, conns int) (*server.PostgresStore, func(), error) {
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	schema := "idem_bench_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		admin.Close()
		return nil, nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = int32(2 * conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = server.Migrate(ctx, pool)
	}
	drop := func() {
		if pool != nil {
			pool.Close()
		}
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
	}
	if err != nil {
		drop()
		return nil, nil, err
	}
	return server.NewPostgresStore(pool), drop, nil
}

// claim is the i-th operation's claim.
func claim(tag string, i int) *server.Claim {
	key := tag + "-" + strconv.Itoa(i) + "-" + uuid.NewString()[:8]
	digest := sha256.Sum256([]byte(key))
	return &server.Claim{Scope: sha256.Sum256([]byte("bench\x00" + key)), Tenant: "acme", Principal: "alice",
		Route: "POST /v1/charges", Key: key, Digest: digest[:], DigestAlg: "bench", Mode: server.Leased,
		Lease: 30 * time.Second, Retention: time.Minute, Wait: 2 * time.Second, Request: []byte(`{"amount_cents":100}`)}
}

var response = &server.Response{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}},
	Body: []byte(`{"id":"ch_1","status":"succeeded"}`)}

// storeOp claims and completes a new key on s.
func storeOp(s server.Store, tag string) func(ctx context.Context, i int) error {
	return func(ctx context.Context, i int) error {
		res, err := s.Claim(ctx, claim(tag, i))
		if err != nil {
			return err
		}
		if res.Verdict != server.VerdictClaimed {
			return fmt.Errorf("verdict %d on a new key", res.Verdict)
		}
		return res.Attempt.Complete(ctx, response)
	}
}

// boundOp runs the store's claim and complete scripts on a new key with
// the arguments the store passes, and nothing else.
func boundOp(rdb *redis.Client, prefix string) func(ctx context.Context, i int) error {
	header := []byte(`{"Content-Type":["application/json"]}`)
	return func(ctx context.Context, i int) error {
		c := claim("bound", i)
		member := fmt.Sprintf("%x", c.Scope)
		tag := "{" + prefix + "-bound:" + strconv.Itoa(i%16) + "}"
		keys := []string{tag + ":r:" + member, tag + ":d:" + c.Route, tag + ":run"}
		token := uuid.NewString()
		args := lua.ClaimArgs{Token: token, Alg: c.DigestAlg, Digest: c.Digest, Lease: c.Lease.Milliseconds(),
			Retention: c.Retention.Milliseconds(), DueMember: member, RunMember: member + c.Route,
			Tenant: c.Tenant, Principal: c.Principal, Route: c.Route, Key: c.Key, Request: c.Request}
		err := lua.Claim.Run(ctx, rdb, keys, args.Argv()...).Err()
		if err != nil {
			return err
		}
		return lua.Complete.Run(ctx, rdb, keys, 0, token, "done", "201", header, response.Body, member, member+c.Route).Err()
	}
}

type result struct {
	rate     float64
	p50, p99 time.Duration
}

// measure runs o.ops operations, o.concurrency at a time, after a warm-up.
func measure(ctx context.Context, o options, op func(ctx context.Context, i int) error) (result, error) {
	for i := range o.concurrency * 10 { // warm-up: connections, statements, scripts
		if err := op(ctx, -1-i); err != nil {
			return result{}, err
		}
	}
	lat := make([]time.Duration, o.ops)
	next := make(chan int)
	errs := make(chan error, o.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for range o.concurrency {
		wg.Go(func() {
			for i := range next {
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					errs <- err
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	for i := range o.ops {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			return result{}, err
		}
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return result{}, err
	default:
	}
	slices.Sort(lat)
	return result{rate: float64(o.ops) / elapsed.Seconds(), p50: lat[len(lat)/2].Round(time.Microsecond),
		p99: lat[len(lat)*99/100].Round(time.Microsecond)}, nil
}
