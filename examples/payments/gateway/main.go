// Command gateway runs the fake card gateway of the idem example
// (api.Gateway) on its own, so that its charges outlive the crashes of the
// payments servers that call it:
//
//	go run ./examples/payments/gateway -addr 127.0.0.1:8081
//	go run ./examples/payments/server -db postgres://... -gateway http://127.0.0.1:8081
//
// It charges once per Idempotency-Key and replays its answer to retries;
// GET /v1/charges/by-key/{key} tells what became of the charge requested
// under a key (the reconciler's lookup), and GET /v1/charges counts the
// charges made. It prints
//
//	payments gateway: listening on http://127.0.0.1:8081
//
// to stdout once it accepts connections, keeps everything in memory, and
// shuts down gracefully on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/examples/payments/internal/httpserve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen `address`")
	declineOver := flag.Int64("decline-over", api.DefaultDeclineOverCents, "decline charges above this many `cents`")
	flag.Parse()
	if flag.NArg() > 0 || *declineOver <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "payments gateway:", err)
		os.Exit(1)
	}
	fmt.Printf("payments gateway: listening on http://%s\n", ln.Addr())
	gw := api.NewGateway(api.GatewayConfig{DeclineOverCents: *declineOver, Logger: log})
	if err := httpserve.Run(ctx, ln, gw, 10*time.Second, httpserve.Timeouts{}, log); err != nil {
		fmt.Fprintln(os.Stderr, "payments gateway:", err)
		os.Exit(1)
	}
}
