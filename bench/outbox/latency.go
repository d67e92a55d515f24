package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/idemkit/idem/outbox"
)

// runs numbers the steady runs, for keys of their own.
var runs atomic.Int64

// steady commits one transaction per message at rate for the run's
// length, each inserting one message with insert, and returns when each
// key's COMMIT was sent.
func steady(ctx context.Context, pool *pgxpool.Pool, o options, insert func(tx pgx.Tx, key string) error) (map[string]time.Time, error) {
	runs.Add(1)
	n := o.messages()
	committed := make(map[string]time.Time, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed error
	tick := time.NewTicker(time.Second / time.Duration(o.rate))
	defer tick.Stop()
	for i := range n {
		<-tick.C
		key := fmt.Sprintf("lat-%d-%d", runs.Load(), i)
		wg.Go(func() {
			tx, err := pool.Begin(ctx)
			if err == nil {
				if err = insert(tx, key); err == nil {
					at := time.Now()
					if err = tx.Commit(ctx); err == nil {
						mu.Lock()
						committed[key] = at
						mu.Unlock()
						return
					}
				}
				_ = tx.Rollback(ctx)
			}
			mu.Lock()
			failed = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return committed, failed
}

// benchLatency measures the time from a message's COMMIT to its arrival
// at a loopback sink, at a steady rate, with one dispatcher.
func benchLatency(ctx context.Context, dbURL string, o options) (result, error) {
	pool, err := openPool(ctx, dbURL, 32)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	if err := outbox.Migrate(ctx, pool); err != nil {
		return result{}, err
	}
	if err := boundGIN(ctx, pool, o.ginLimit); err != nil {
		return result{}, err
	}
	n := o.messages()
	s := newSink(n)
	defer s.srv.Close()
	ob, err := outbox.New(pool, outbox.Config{Logger: slog.New(slog.DiscardHandler), FetchCooldown: o.cooldown})
	if err != nil {
		return result{}, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ob.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(time.Second) // the dispatcher starts (leader election, LISTEN)
	committed, err := steady(ctx, pool, o, func(tx pgx.Tx, key string) error {
		_, err := ob.Enqueue(ctx, tx, message(s.srv.URL, key))
		return err
	})
	if err != nil {
		return result{}, err
	}
	<-s.all
	s.mu.Lock()
	defer s.mu.Unlock()
	return report("outbox, commit -> receiver", o, committed, s.seen), nil
}

// result is one steady run's percentiles.
type result struct{ p50, p99 time.Duration }

func report(what string, o options, committed, arrived map[string]time.Time) result {
	var ds []time.Duration
	for k, at := range committed {
		ds = append(ds, max(arrived[k].Sub(at), 0))
	}
	p50, p99 := percentiles(ds)
	fmt.Printf("%-32s at %d/s for %s (%d messages): p50 %s, p99 %s\n", what, o.rate, o.seconds, len(ds),
		p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
	return result{p50, p99}
}

// benchLatencies runs o.rounds rounds of the outbox's latency and River's
// alone, alternating, and prints the medians of their percentiles.
func benchLatencies(ctx context.Context, dbURL string, o options) error {
	var ob, rv []result
	for range o.rounds {
		r, err := benchLatency(ctx, dbURL, o)
		if err != nil {
			return err
		}
		ob = append(ob, r)
		if r, err = benchRiver(ctx, dbURL, o); err != nil {
			return err
		}
		rv = append(rv, r)
	}
	for _, x := range []struct {
		what string
		rs   []result
	}{{"outbox", ob}, {"River alone", rv}} {
		var p50s, p99s []time.Duration
		for _, r := range x.rs {
			p50s, p99s = append(p50s, r.p50), append(p99s, r.p99)
		}
		slices.Sort(p50s)
		slices.Sort(p99s)
		fmt.Printf("median of %d rounds, %s: p50 %s, p99 %s (p99 from %s to %s)\n", len(x.rs), x.what,
			p50s[len(p50s)/2].Round(10*time.Microsecond), p99s[len(p99s)/2].Round(10*time.Microsecond),
			p99s[0].Round(10*time.Microsecond), p99s[len(p99s)-1].Round(10*time.Microsecond))
	}
	return nil
}

// riverArgs is the bare job of benchRiver.
type riverArgs struct {
	Key string `json:"key"`
}

func (riverArgs) Kind() string { return "bench_bare" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	s *sink
}

func (w *riverWorker) Work(_ context.Context, job *river.Job[riverArgs]) error {
	w.s.note(job.Args.Key, time.Now())
	return nil
}

// benchRiver is benchLatency through River alone: the time from COMMIT to
// a no-op worker starting, with the outbox's fetch settings.
func benchRiver(ctx context.Context, dbURL string, o options) (result, error) {
	pool, err := openPool(ctx, dbURL, 32)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	if err := outbox.Migrate(ctx, pool); err != nil {
		return result{}, err
	}
	n := o.messages()
	s := newSink(n)
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{s: s})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 20}}, // outbox.Config.Workers's default
		Workers: workers, FetchCooldown: cmp.Or(o.cooldown, 2*time.Millisecond), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return result{}, err
	}
	if err := client.Start(ctx); err != nil {
		return result{}, err
	}
	defer func() { _ = client.Stop(ctx) }()
	time.Sleep(time.Second)
	committed, err := steady(ctx, pool, o, func(tx pgx.Tx, key string) error {
		_, err := client.InsertTx(ctx, tx, riverArgs{Key: key}, nil)
		return err
	})
	if err != nil {
		return result{}, err
	}
	<-s.all
	s.mu.Lock()
	defer s.mu.Unlock()
	return report("River alone, commit -> worker", o, committed, s.seen), nil
}

// sqlBoundGIN bounds the pending lists of the GIN indexes of River's
// table (in the first schema of the search_path) at %d kB.
const sqlBoundGIN = `DO $$
DECLARE ix regclass;
BEGIN
    FOR ix IN SELECT i.indexrelid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = 'river_job'::regclass AND a.amname = 'gin'
    LOOP
        EXECUTE format('ALTER INDEX %%s SET (gin_pending_list_limit = %d)', ix);
    END LOOP;
END $$`

// boundGIN bounds the pending lists of the GIN indexes of River's table
// at kB, in place of Migrate's bound (until the next Migrate: River
// alone's rounds have Migrate's); 0 keeps Migrate's.
func boundGIN(ctx context.Context, pool *pgxpool.Pool, kB int) error {
	if kB == 0 {
		return nil
	}
	_, err := pool.Exec(ctx, fmt.Sprintf(sqlBoundGIN, kB))
	return err
}

// migrateSchema applies the outbox's tables in schema (for pgbench).
func migrateSchema(ctx context.Context, raw, schema string) error {
	if schema == "" {
		return fmt.Errorf("-schema is required")
	}
	pool, err := openPool(ctx, withSearchPath(raw, schema), 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	return outbox.Migrate(ctx, pool)
}
