// Command idemcheck checks, from the outside, that an HTTP endpoint honours
// the Idempotency-Key header: that a retry replays, that a reused key with
// another body is refused, that concurrent duplicates run once, that keys
// are scoped by principal, and that retries through injected faults (the
// testserver's proxy, driven by the idem client) take effect exactly once.
//
//	go run github.com/idemkit/idem/cmd/idemcheck \
//	    -url http://127.0.0.1:8080/v1/payments -body @payment.json \
//	    -header 'Authorization: Bearer acme:alice' \
//	    -principal2 'Authorization: Bearer acme:bob' -key-required \
//	    -id-field payment_id \
//	    -count-url http://127.0.0.1:8080/v1/accounts/acc-1 -count-field payment_count
//
// It prints a table, one line per check (pass, fail with the requests and
// responses that show it, n/a, info), or with -json one JSON document. It
// exits 0 when every required check passes, 1 when one fails, 2 for bad
// flags. It sends requests only to loopback hosts and to hosts named with
// -allow-host, follows no redirect, and bounds its requests (-concurrency,
// -n) and its time (-timeout). See docs/testing.md, "The conformance
// checker: idemcheck", for what each check proves and cannot prove.
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

	"github.com/idemkit/idem/internal/conformance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitPass  = 0
	exitFail  = 1
	exitUsage = 2
)

// run is the program: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitPass
	case err != nil:
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := conformance.Run(ctx, o.cfg)
	if err != nil { // Validate passed in parseFlags; kept for safety
		fmt.Fprintln(stderr, "idemcheck:", err)
		return exitUsage
	}
	if o.json {
		err = writeJSON(stdout, rep)
	} else {
		err = writeTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(stderr, "idemcheck: writing the report:", err)
		return exitFail
	}
	if !rep.Passed() {
		return exitFail
	}
	return exitPass
}
