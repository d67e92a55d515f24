package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/idemkit/idem/internal/conformance"
)

// errUsage: the flags are wrong (already reported on stderr).
var errUsage = errors.New("usage")

// options are the program's flags.
type options struct {
	cfg     conformance.Config
	json    bool
	timeout time.Duration
}

// maxTimeout bounds -timeout: the run stays bounded whatever is asked.
const maxTimeout = time.Hour

// raw holds the flags that need work before they go into the Config.
type raw struct {
	body, checks, keyFormat   string
	header, principal2, allow listFlag
	seed                      uint64
}

// parseFlags parses args into options. It reports every problem on stderr
// and returns errUsage (or flag.ErrHelp for -h).
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("idemcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs, stderr) }
	rf := defineFlags(fs, &o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errUsage
	}
	c := &o.cfg
	c.Seed = rf.seed
	if !flagSet(fs, "seed") {
		c.Seed = rand.Uint64()
	}
	c.AllowHosts = rf.allow
	c.KeyFormat = conformance.KeyFormat(rf.keyFormat)
	if rf.checks != "" {
		c.Checks = strings.Split(rf.checks, ",")
	}
	if err := o.finish(fs, rf); err != nil {
		fmt.Fprintln(stderr, "idemcheck:", err)
		return o, errUsage
	}
	return o, nil
}

// defineFlags defines the flags on fs: into o, and into the returned raw
// values.
func defineFlags(fs *flag.FlagSet, o *options) *raw {
	rf := &raw{}
	c := &o.cfg
	fs.StringVar(&c.URL, "url", "", "the endpoint to check (`URL`, required)")
	fs.StringVar(&c.Method, "method", "POST", "the `method` of an operation")
	fs.StringVar(&rf.body, "body", "", "the body `template`, or @file; placeholders {{n}} and {{uuid}}")
	fs.Var(&rf.header, "header", "a request `header` 'Name: value' sent on every request (repeatable)")
	fs.Var(&rf.principal2, "principal2", "a second principal's `header` 'Name: value', replacing -header's of that name (repeatable; enables the scope check)")
	fs.StringVar(&c.KeyHeader, "key-header", conformance.DefaultKeyHeader, "the `name` of the key header")
	fs.StringVar(&rf.keyFormat, "key-format", string(conformance.KeyUUID), "the keys' `format`: uuid (a UUIDv4, 36 characters, which APIs that check keys accept) or prefixed (idemcheck-<uuid>, 46 characters, easy to find in logs)")
	fs.StringVar(&c.ReplayedHeader, "replayed-header", "Idempotent-Replayed", "the response header that marks a replay (`name`; '' if the API documents none)")
	fs.BoolVar(&c.KeyRequired, "key-required", false, "the endpoint refuses requests without a key (enables the key-missing check)")
	fs.IntVar(&c.MaxKeyLen, "max-key-len", conformance.DefaultMaxKeyLen, "the longest key the API accepts, in `bytes`")
	fs.StringVar(&c.Effects.IDField, "id-field", "", "JSON `field` (dotted path) of a 2xx body that names the created resource")
	fs.StringVar(&c.Effects.VerifyURL, "verify-url", "", "GET `URL` with {id} that must answer 2xx for each id named (needs -id-field)")
	fs.StringVar(&c.Effects.CountURL, "count-url", "", "GET `URL` whose JSON -count-field grows by one per effect (enables the faults check)")
	fs.StringVar(&c.Effects.CountField, "count-field", "", "JSON `field` (dotted path) of the -count-url body that counts the effects")
	fs.IntVar(&c.Concurrency, "concurrency", conformance.DefaultConcurrency, "requests sent at once with one key (`n`, 2 to 64)")
	fs.IntVar(&c.Operations, "n", conformance.DefaultOperations, "operations of the faults check (1 to 1000)")
	fs.DurationVar(&c.AttemptTimeout, "attempt-timeout", conformance.DefaultAttemptTimeout, "the faults check's bound on each attempt")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", conformance.DefaultRequestTimeout, "the bound on each request of the other checks")
	fs.DurationVar(&c.WaitTimeout, "wait-timeout", conformance.DefaultWaitTimeout, "how long the concurrent check waits for a key whose duplicates were told to wait (409) to replay")
	fs.Uint64Var(&rf.seed, "seed", 0, "seeds the faults (default: random, printed)")
	fs.Var(&rf.allow, "allow-host", "a non-loopback `host` the checker may send to (repeatable)")
	fs.StringVar(&rf.checks, "checks", "", "the checks to run, comma-separated (default all: "+strings.Join(conformance.CheckNames(), ",")+")")
	fs.BoolVar(&o.json, "json", false, "print one JSON document instead of the table")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bounds the whole run")
	return rf
}

// finish checks what flag parsing cannot and builds the rest of the
// Config: the body template and the headers.
func (o *options) finish(fs *flag.FlagSet, rf *raw) error {
	c := &o.cfg
	if fs.NArg() > 0 {
		return fmt.Errorf("no arguments are taken, got %q", fs.Args())
	}
	if c.URL == "" {
		return errors.New("-url is required")
	}
	if o.timeout <= 0 || o.timeout > maxTimeout {
		return fmt.Errorf("-timeout must be positive and at most %s", maxTimeout)
	}
	if c.AttemptTimeout <= 0 || c.RequestTimeout <= 0 || c.WaitTimeout <= 0 {
		return errors.New("-attempt-timeout, -request-timeout and -wait-timeout must be positive")
	}
	// The Config reads zero as "the default"; a flag set to 0 is a
	// mistake to report, not a request for the default.
	for _, f := range []struct {
		name  string
		value int
	}{{"-concurrency", c.Concurrency}, {"-n", c.Operations}, {"-max-key-len", c.MaxKeyLen}} {
		if f.value == 0 {
			return fmt.Errorf("%s cannot be 0", f.name)
		}
	}
	body, err := readBody(rf.body)
	if err != nil {
		return err
	}
	if c.Body, err = conformance.ParseTemplate(body); err != nil {
		return err
	}
	if c.Header, err = parseHeaders(rf.header); err != nil {
		return err
	}
	if len(rf.principal2) > 0 {
		if c.Principal2, err = parseHeaders(rf.principal2); err != nil {
			return err
		}
	}
	if c.Header.Get("Content-Type") == "" && json.Valid(c.Body.Render(1, "00000000-0000-4000-8000-000000000000")) {
		c.Header.Set("Content-Type", "application/json")
	}
	return c.Validate()
}

// readBody returns the body template: the flag's value, or the contents
// of the file it names after "@".
func readBody(v string) (string, error) {
	name, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("-body: %w", err)
	}
	return string(b), nil
}

// parseHeaders parses 'Name: value' lines.
func parseHeaders(lines []string) (http.Header, error) {
	h := http.Header{}
	for _, l := range lines {
		name, value, ok := strings.Cut(l, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("header %q is not 'Name: value'", l)
		}
		h.Add(name, strings.TrimSpace(value))
	}
	return h, nil
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// usage prints the synopsis and the flags.
func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, `usage: idemcheck -url URL [-body @file] [-header 'Name: value']... [flags]

Checks that an endpoint honours Idempotency-Key: replays, refusals,
concurrency, scope and retries through injected faults. Sends requests to
loopback hosts only, unless -allow-host names the host. Exit status: 0 when
every required check passes, 1 when one fails, 2 for bad flags.

`)
	fs.PrintDefaults()
}
