// Command receiver runs the downstream service of the payments example on
// its own (api.Receiver): it records each payment.created notification
// once, whatever the retries, because its route runs under
// server.Middleware.
//
//	go run ./examples/payments/receiver -addr 127.0.0.1:8090 [-db postgres://...]
//	go run ./examples/payments/dispatcher -db postgres://...
//
// With -db (default $DATABASE_URL) it records in payment_notifications
// (api.MigrateReceiver applies the schema), else in memory. It prints
//
//	payments receiver: listening on http://127.0.0.1:8090
//
// to stdout once it accepts connections, and shuts down gracefully on
// SIGINT or SIGTERM.
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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/examples/payments/internal/httpserve"
	"github.com/idemkit/idem/internal/dbflag"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen `address`")
	var dbURL string
	dbflag.Var(flag.CommandLine, &dbURL, os.Getenv, dbflag.Memory)
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, dbURL); err != nil {
		fmt.Fprintln(os.Stderr, "payments receiver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, dbURL string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg := api.ReceiverConfig{Logger: log}
	if dbURL != "" {
		pool, err := pgxpool.New(ctx, dbURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		if err := api.MigrateReceiver(ctx, pool); err != nil {
			return err
		}
		cfg.DB = pool
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("payments receiver: listening on http://%s\n", ln.Addr())
	return httpserve.Run(ctx, ln, api.NewReceiver(cfg), 10*time.Second, httpserve.Timeouts{}, log)
}
