// Command faultproxy is an HTTP reverse proxy on loopback that injects
// faults per request, for chaos-testing an HTTP server written in any
// language: it knows requests, attempts and Idempotency-Keys, where a TCP
// proxy only knows bytes.
//
//	go run ./testserver/cmd/faultproxy -listen 127.0.0.1:8081 \
//	    -upstream http://127.0.0.1:8080 -fault drop-reset -p 0.2
//
// Rules come from -rules (a JSON file, see [testserver.ParseRules]) and from
// -fault. The first line on stdout gives the address and the seed; -log
// prints every request's event as a JSON line. SIGHUP reloads the rules
// file; SIGINT or SIGTERM stops the proxy and prints a summary of every
// request on stderr.
//
// Under go run the proxy is a child of the go command, which does not pass
// on a signal sent to its own pid (it ignores SIGINT and waits for the
// child; SIGTERM ends it and leaves the child running). Ctrl-C reaches the
// proxy, as does kill -INT %?faultproxy for a background job of a shell
// with job control (it signals the job's process group); from a script,
// build it first (go build -o) and signal the program itself.
//
// Memory stays flat however long it runs: events are counted as they
// happen, not kept, and attempt numbers are remembered for an hour after
// an operation's latest request (a key idle for longer starts again at
// attempt 1).
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
	t := &tally{out: stdout}
	if o.logEvents {
		t.enc = json.NewEncoder(stdout)
	}
	cfg := testserver.Config{
		Addr: o.listen, Seed: o.seed, Rules: rules,
		KeyHeader: o.keyHeader, OperationHeader: o.opHeader, FaultHeader: o.faultHeader, HoldTimeout: o.holdTimeout,
		MaxEvents: 1, // the summary is counted by t, not from the kept events
		OnEvent:   t.event,
	}
	s, err := testserver.NewProxy(o.upstreams, cfg)
	if err != nil {
		return err
	}
	t.printf("faultproxy: listening on %s (seed %d, %d rules)\n", s.URL, o.seed, len(rules))
	for v := range sig {
		if v != syscall.SIGHUP {
			break
		}
		reload(s, o, stderr)
	}
	s.Close()
	fmt.Fprint(stderr, t.summary())
	return nil
}

// tally counts every event for the exit summary, and prints it as a JSON
// line with -log. It is safe for concurrent use.
type tally struct {
	mu  sync.Mutex // guards sum and out (event lines and the start line)
	out io.Writer
	enc *json.Encoder // on out; nil without -log
	sum testserver.Summary
}

// event is the proxy's Config.OnEvent.
func (t *tally) event(e testserver.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sum.Add(e)
	if t.enc != nil {
		_ = t.enc.Encode(e)
	}
}

// printf writes a line to out.
func (t *tally) printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, format, args...)
}

// summary returns the counts so far.
func (t *tally) summary() testserver.Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sum
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
