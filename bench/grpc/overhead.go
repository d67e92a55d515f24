package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/idemkit/idem/grpcidem"
	"github.com/idemkit/idem/internal/proccpu"
	"github.com/idemkit/idem/internal/rpcidem"
	"github.com/idemkit/idem/server"
)

// variant is one server of the overhead scenario.
type variant struct {
	name string
	cc   *grpc.ClientConn
	per  []time.Duration // the mean per call of each round
	cpu  []time.Duration // the process's CPU time (client and server) per call of each round: on a shared host, the cost where the wall time is mostly the wait for a core
}

func overhead(ctx context.Context, dbURL string, rounds, calls int) error {
	quiet := server.Config{Logger: slog.New(slog.DiscardHandler)}
	stores := []struct {
		name  string
		store server.Store
	}{{"bare", nil}, {outcomeOnly, nil}, {"memory", server.NewMemoryStore()}}
	if dbURL != "" {
		pool, drop, err := benchSchema(ctx, dbURL)
		if err != nil {
			return err
		}
		defer drop()
		stores = append(stores, struct {
			name  string
			store server.Store
		}{"postgres", server.NewPostgresStore(pool)})
	}
	var vs []*variant
	for _, s := range stores {
		var ics []grpc.UnaryServerInterceptor
		if s.store != nil {
			ics = append(ics, grpcidem.UnaryServerInterceptor(s.store, grpcidem.Config{Server: quiet}))
		}
		if s.name == outcomeOnly {
			ics = append(ics, outcomeMetadata)
		}
		addr, _, stop, err := serve(ics...)
		if err != nil {
			return err
		}
		defer stop()
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer cc.Close()
		vs = append(vs, &variant{name: s.name, cc: cc})
	}
	for _, v := range vs { // warm up: connections, pools, JIT of the maps
		if _, err := run(ctx, v.cc, 200); err != nil {
			return err
		}
	}
	for range rounds {
		for _, v := range vs {
			before := proccpu.Used()
			d, err := run(ctx, v.cc, calls)
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			v.per = append(v.per, d)
			v.cpu = append(v.cpu, (proccpu.Used()-before)/time.Duration(calls))
		}
	}
	report(vs, rounds, calls)
	return nil
}

// run makes n sequential keyed calls and returns the mean per call.
func run(ctx context.Context, cc *grpc.ClientConn, n int) (time.Duration, error) {
	start := time.Now()
	for range n {
		key := uuid.NewString()
		cctx := metadata.AppendToOutgoingContext(ctx, grpcidem.MetadataKey, key)
		if err := pay(cctx, cc, key); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(n), nil
}

func report(vs []*variant, rounds, calls int) {
	fmt.Printf("## overhead: %d rounds of %d sequential calls per variant, median round\n\n", rounds, calls)
	fmt.Println("| server | µs per call (median) | rounds (µs) | vs bare | CPU µs per call (median) | CPU vs bare |")
	fmt.Println("|---|---|---|---|---|---|")
	bare, bareCPU := median(vs[0].per), median(vs[0].cpu)
	for _, v := range vs {
		m, c := median(v.per), median(v.cpu)
		fmt.Printf("| %s | %.1f | %s | %+.1f%% | %.1f | %+.1f%% |\n", v.name, us(m), list(v.per), 100*(float64(m)/float64(bare)-1),
			us(c), 100*(float64(c)/float64(bareCPU)-1))
	}
	fmt.Println()
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func list(ds []time.Duration) string {
	out := ""
	for i, d := range ds {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%.0f", us(d))
	}
	return out
}

// benchSchema is a pool on a schema of its own, migrated, and the func
// that drops it.
func benchSchema(ctx context.Context, dbURL string) (*pgxpool.Pool, func(), error) {
	schema := fmt.Sprintf("bench_grpc_%d", time.Now().UnixNano())
	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		admin.Close()
		return nil, nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
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
	return pool, drop, nil
}

// outcomeOnly is the variant that measures what the operation's outcome
// costs on the wire alone: the bare service, whose answers carry the
// outcome metadata entries a first run's answer carries behind the
// interceptor (docs/CONTRACT.md §11), with none of idem's other work.
const outcomeOnly = "bare + outcome metadata"

// outcomeMetadata sets the outcome entries of a completed operation, as
// grpcidem does: a fresh reference (the hex of a 32-byte scope hash) and
// the key's expiry a day on.
func outcomeMetadata(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ref := sha256.Sum256([]byte(uuid.NewString()))
	o := server.Outcome{State: "completed", Ref: hex.EncodeToString(ref[:]), Expires: time.Now().Add(24 * time.Hour)}
	if err := grpc.SetHeader(ctx, metadata.New(rpcidem.OutcomeEntries(o))); err != nil {
		return nil, err
	}
	return h(ctx, req)
}
