// Command grpc measures grpcidem on loopback, in one run (BENCHMARKS.md
// §17):
//
//   - overhead: the server interceptor's cost per unary payment call
//     against the bare service, on the memory store and on Postgres
//     (DATABASE_URL; skipped when it is empty), sequential calls, rounds
//     in turns, the median round reported;
//   - drops: calls of which a share of the answers is dropped after the
//     handler ran (and, behind idem, committed), sent by idem's client
//     interceptor (to idem's server interceptor), by grpc-go's own retry
//     policy and by failsafe-go's gRPC retry (to the bare service): the
//     calls whose effect ran twice, and the calls completed.
//
// Run it as:
//
//	go run . -rounds 5 -calls 2000 -drop-calls 2000 -drop 0.2
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 5, "overhead rounds, each of every variant in turn")
	calls := flag.Int("calls", 2000, "sequential calls per variant and round")
	dropCalls := flag.Int("drop-calls", 2000, "logical calls of the drops scenario, per client")
	drop := flag.Float64("drop", 0.2, "share of answers dropped after the handler ran")
	conc := flag.Int("concurrency", 8, "concurrent callers in the drops scenario")
	seed := flag.Uint64("seed", 1, "seed of the drops")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := overhead(ctx, os.Getenv("DATABASE_URL"), *rounds, *calls); err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		os.Exit(1)
	}
	if err := drops(ctx, *dropCalls, *conc, *drop, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "drops:", err)
		os.Exit(1)
	}
}
