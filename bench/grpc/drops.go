package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafegrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/grpcidem"
	"github.com/idemkit/idem/server"
)

// grpcRetry is grpc-go's own retry policy (gRFC A6) for the service:
// five attempts, UNAVAILABLE retried, 10 ms to 100 ms backoff.
const grpcRetry = `{"methodConfig": [{"name": [{"service": "idem.bench.Payments"}],
 "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
  "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

// client is one client of the drops scenario.
type client struct {
	name   string
	idem   bool // its server has idem's interceptor
	dialOp grpc.DialOption
}

func drops(ctx context.Context, calls, conc int, share float64, seed uint64) error {
	clients := []client{
		{"idem (grpcidem client and server interceptors)", true,
			grpc.WithUnaryInterceptor(grpcidem.UnaryClientInterceptor(idem.Config{}))},
		{"grpc-go retry policy (gRFC A6)", false, grpc.WithDefaultServiceConfig(grpcRetry)},
		{"failsafe-go failsafegrpc retry", false, grpc.WithUnaryInterceptor(failsafegrpc.NewUnaryClientInterceptor[any](
			failsafegrpc.NewRetryPolicyBuilder[any]().WithMaxAttempts(5).WithBackoff(10*time.Millisecond, 100*time.Millisecond).Build()))},
	}
	fmt.Printf("## drops: %d calls per client, %.0f%% of answers dropped after the handler ran, %d concurrent callers, seed %d\n\n",
		calls, 100*share, conc, seed)
	fmt.Println("| client | effects done twice | calls completed | wall time |")
	fmt.Println("|---|---|---|---|")
	for _, c := range clients {
		if err := dropRun(ctx, c, calls, conc, share, seed); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	fmt.Println()
	return nil
}

func dropRun(ctx context.Context, c client, calls, conc int, share float64, seed uint64) error {
	ics := []grpc.UnaryServerInterceptor{dropper(share, seed)}
	if c.idem {
		ics = append(ics, grpcidem.UnaryServerInterceptor(server.NewMemoryStore(),
			grpcidem.Config{Server: server.Config{Logger: slog.New(slog.DiscardHandler)}}))
	}
	addr, p, stop, err := serve(ics...)
	if err != nil {
		return err
	}
	defer stop()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), c.dialOp)
	if err != nil {
		return err
	}
	defer cc.Close()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(calls); i = next.Add(1) {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if pay(cctx, cc, strconv.FormatInt(i, 10)) == nil {
					done.Add(1)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	fmt.Printf("| %s | %d | %d of %d (%.2f%%) | %s |\n", c.name, p.doubles(), done.Load(), calls,
		100*float64(done.Load())/float64(calls), time.Since(start).Round(10*time.Millisecond))
	return nil
}
