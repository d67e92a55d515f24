// Command faultproxy is an HTTP reverse proxy on loopback that injects
// faults per request, for chaos-testing an HTTP server written in any
// language: it knows requests, attempts and Idempotency-Keys, where a TCP
// proxy only knows bytes.
//
//	go run ./testserver/cmd/faultproxy -listen 127.0.0.1:8081 \
//	    -upstream http://127.0.0.1:8080 -fault drop-reset -p 0.2
//
// Rules come from -rules (a JSON file, see testserver.ParseRules) and from
// -fault. The first line on stdout gives the address and the seed; -log
// prints every request's event as a JSON line. SIGHUP reloads the rules
// file; SIGINT or SIGTERM stops the proxy and prints a summary on stderr.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/idemkit/idem/testserver"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := run(os.Args[1:], os.Stdout, os.Stderr, sig)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "faultproxy:", err)
		os.Exit(2)
	}
}

// run starts the proxy and serves until a stop signal.
func run(args []string, stdout, stderr io.Writer, sig <-chan os.Signal) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	rules, err := o.rules()
	if err != nil {
		return err
	}
	var outMu sync.Mutex // event lines and the start line share stdout
	cfg := testserver.Config{
		Addr: o.listen, Seed: o.seed, Rules: rules,
		OperationHeader: o.opHeader, FaultHeader: o.faultHeader, HoldTimeout: o.holdTimeout,
		MaxEvents: 100000,
	}
	if o.logEvents {
		enc := json.NewEncoder(stdout)
		cfg.OnEvent = func(e testserver.Event) {
			outMu.Lock()
			defer outMu.Unlock()
			_ = enc.Encode(e)
		}
	}
	s, err := testserver.NewProxy(o.upstreams, cfg)
	if err != nil {
		return err
	}
	outMu.Lock()
	fmt.Fprintf(stdout, "faultproxy: listening on %s (seed %d, %d rules)\n", s.URL, o.seed, len(rules))
	outMu.Unlock()
	for v := range sig {
		if v != syscall.SIGHUP {
			break
		}
		reload(s, o, stderr)
	}
	s.Close()
	fmt.Fprint(stderr, testserver.Summarize(s.Events()))
	return nil
}

// reload re-reads the rules; on error the old rules stay.
func reload(s *testserver.Server, o options, stderr io.Writer) {
	rules, err := o.rules()
	if err == nil {
		err = s.SetRules(rules)
	}
	if err != nil {
		fmt.Fprintln(stderr, "faultproxy: reload failed, keeping the old rules:", err)
		return
	}
	fmt.Fprintf(stderr, "faultproxy: reloaded %d rules\n", len(rules))
}
