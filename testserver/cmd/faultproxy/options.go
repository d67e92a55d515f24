package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/idemkit/idem/testserver"
)

// options are the parsed command line.
type options struct {
	listen      string
	upstreams   []string
	rulesFile   string
	fault       testserver.Fault
	p           float64
	method      string
	path        string
	seed        uint64
	opHeader    string
	keyHeader   string
	faultHeader string
	holdTimeout time.Duration
	logEvents   bool
}

// parseOptions parses args; usage and errors go to stderr.
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	var upstream, fault, seed string
	fs := flag.NewFlagSet("faultproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: faultproxy -upstream URL[,URL...] [-listen ADDR] [-rules FILE] [-fault SPEC [-p P] [-method M] [-path P]] [flags]\n\n")
		fmt.Fprintf(stderr, "An HTTP reverse proxy on loopback that injects faults per request (see package testserver).\n")
		fmt.Fprintf(stderr, "Fault kinds: %s.\nSIGHUP reloads the rules file; SIGINT or SIGTERM stops and prints a summary.\n\n", testserver.KindList())
		fs.PrintDefaults()
	}
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "loopback `address` to listen on (port 0 picks a free one)")
	fs.StringVar(&upstream, "upstream", "", "upstream base `URLs`, comma-separated; requests go to them in turn (required)")
	fs.StringVar(&o.rulesFile, "rules", "", "JSON rules `file` (testserver.ParseRules format); its rules come before -fault")
	fs.StringVar(&fault, "fault", "", "a fault for every matching request, e.g. drop-reset or 'status;status=503;retry-after=1'")
	fs.Float64Var(&o.p, "p", 1, "probability of -fault per (operation, attempt), seeded")
	fs.StringVar(&o.method, "method", "", "apply -fault to this `method` only")
	fs.StringVar(&o.path, "path", "", "apply -fault to this `path` only (a trailing * matches a prefix)")
	fs.StringVar(&seed, "seed", "", "seed of the probabilistic faults (default: from the clock, printed at start)")
	fs.StringVar(&o.keyHeader, "key-header", "", "`header` that carries the idempotency key (default Idempotency-Key)")
	fs.StringVar(&o.opHeader, "op-header", "", "`header` naming the operation of requests without an idempotency key")
	fs.StringVar(&o.faultHeader, "fault-header", "", "request `header` that may name a fault for that request (off when empty)")
	fs.DurationVar(&o.holdTimeout, "hold-timeout", 0, "how long a hold fault waits for the retry (default 10s)")
	fs.BoolVar(&o.logEvents, "log", false, "print every request's event as a JSON line on stdout")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if upstream == "" {
		return o, errors.New("-upstream is required")
	}
	o.upstreams = strings.Split(upstream, ",")
	var err error
	if o.fault, err = testserver.ParseFault(fault); err != nil {
		return o, fmt.Errorf("-fault: %w", err)
	}
	if o.seed, err = testserver.ParseSeed(seed); err != nil {
		return o, fmt.Errorf("-seed: %w", err)
	}
	return o, nil
}

// rules reads the rules file (if any) and appends the -fault rule.
func (o options) rules() ([]testserver.Rule, error) {
	var rules []testserver.Rule
	if o.rulesFile != "" {
		data, err := os.ReadFile(o.rulesFile)
		if err != nil {
			return nil, err
		}
		if rules, err = testserver.ParseRules(data); err != nil {
			return nil, fmt.Errorf("%s: %w", o.rulesFile, err)
		}
	}
	if o.fault.Kind != testserver.FaultNone {
		rules = append(rules, testserver.Rule{
			Name:  "flag",
			Match: testserver.Match{Method: o.method, Path: o.path},
			Mix:   []testserver.Chance{{P: o.p, Fault: o.fault}},
		})
	}
	if err := testserver.ValidateRules(rules); err != nil {
		return nil, err
	}
	return rules, nil
}
