// Command outage measures what clients do through short and long outages
// of a keyed payments host on loopback: idem with Config{} (and with its
// breaker off, its budget's denials waiting or failing fast, and with its
// concurrency limit on) beside go-retryablehttp with its defaults and
// failsafe-go with retries (alone, with a circuit breaker, and with its
// AdaptiveLimiter), in one run, on the same fault schedules:
//
//	cd bench/outage && go run . -rounds 3 -svg ../../docs
//	cd bench/outage && go run . -clients idem,go-retryablehttp -scenarios blip
//
// Four scenarios (issue 26): a blip (every request answered 503 with
// Retry-After: 1 from 3 s to 5.5 s, 400 operations a second for 9 s, 8 s
// deadlines), the same blip without Retry-After, a storm (every request
// 503 for 9 s, 400 a second, 2 s deadlines) and a brownout (40% of
// attempts 503 with Retry-After: 1, drawn by operation and attempt, 100 a
// second for 9 s, 8 s deadlines), and an overload (issue 41: a host that
// serves 10 requests at once, 10 ms each, behind a queue of 200, 503 with
// Retry-After: 1 past it; 2,000 operations a second for 6 s, then 500 a
// second for 4 s, 2 s deadlines; its table adds the share of the
// operations started after the overload that completed) and a quota
// (issue 47: a host allowing 500 requests per 1 s window, announced with
// the RateLimit headers, 429 with Retry-After past it; 800 operations a
// second for 8 s, 3 s deadlines). The load is open-loop: operation n starts
// at n/rate in a goroutine of its own with its own deadline, so a client
// that waits cannot lower the offered load and one that fails fast cannot
// raise it. Each operation is a keyed POST (Idempotency-Key op-<n>); the
// host runs a key once and replays it. The table gives, per scenario and
// client, the median over the rounds of: operations failed, requests that
// reached the host per operation, the p50 and p99 of every operation's
// latency (failed ones included), the span from the first failure to the
// last, the requests the host refused (503 for capacity, 429 for the
// quota), the share of its capacity the host served during the overload
// ("host busy": 100% when every one of its slots served all along), the
// most it held at once, the p50 and p99 of the operations
// made, and the failures by reason (of the last round). With -svg, it
// writes a timeline per scenario (outage-<scenario>.svg) of operations
// completed and failed per 100 ms, one lane per client, from the last
// round, with the requests the host held (in service or queued) as a line
// where it has a capacity. The program has a go.mod of its own, so that idem depends on
// neither peer.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds; each runs every scenario with every client")
	only := flag.String("scenarios", "", "comma-separated scenarios to run (default all): blip, blip-without-retry-after, storm, brownout, overload, quota")
	svgDir := flag.String("svg", "", "a folder to write a timeline per scenario into (none when empty)")
	seed := flag.Uint64("seed", 1, "seed of the brownout's draws")
	onlyClients := flag.String("clients", "", "comma-separated clients to run (default all): idem, idem-no-breaker, idem-no-breaker-fail-fast, idem-concurrency-limit, go-retryablehttp, failsafe-go-retry, failsafe-go-retry+adaptive-limiter, failsafe-go-retry+breaker")
	flag.Parse()
	if *rounds <= 0 {
		fail("-rounds must be positive")
	}
	scs, err := selected(scenarios(*seed), *only)
	if err != nil {
		fail(err.Error())
	}
	h, err := startHost()
	if err != nil {
		fail(err.Error())
	}
	defer h.close()
	cs, err := selectedClients(clients(), *onlyClients)
	if err != nil {
		fail(err.Error())
	}
	fmt.Printf("outage: %d rounds, %s\n", *rounds, time.Now().UTC().Format(time.RFC3339))
	for _, sc := range scs {
		results := make([][]figures, len(cs))
		last := make([]run, len(cs)) // of the last round, for the timeline
		for r := range *rounds {
			for k := range cs { // each round starts one client later, so that none always runs first
				i := (r + k) % len(cs)
				rn := runOnce(h, sc, cs[i])
				f := summarise(rn, sc)
				results[i], last[i] = append(results[i], f), rn
				fmt.Fprintf(os.Stderr, "  %s, round %d, %s: %d of %d failed, %.2f requests per operation\n",
					sc.name, r+1, cs[i].name, f.failed, f.ops, f.requestsPerOp)
			}
		}
		report(os.Stdout, sc, cs, results)
		if *svgDir != "" {
			path := filepath.Join(*svgDir, "outage-"+slug(sc.name)+".svg")
			if err := writeTimeline(path, sc, cs, last); err != nil {
				fail(err.Error())
			}
			fmt.Printf("timeline: %s\n\n", path)
		}
	}
}

// selected returns the scenarios named in only (all when empty).
func selected(all []scenario, only string) ([]scenario, error) {
	if only == "" {
		return all, nil
	}
	var out []scenario
	for _, name := range strings.Split(only, ",") {
		found := false
		for _, sc := range all {
			if slug(sc.name) == strings.TrimSpace(name) {
				out, found = append(out, sc), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-scenarios: no scenario %q", name)
		}
	}
	return out, nil
}

// selectedClients returns the clients named in only (all when empty).
func selectedClients(all []client, only string) ([]client, error) {
	if only == "" {
		return all, nil
	}
	var out []client
	for _, name := range strings.Split(only, ",") {
		found := false
		for _, c := range all {
			if slug(c.name) == strings.TrimSpace(name) {
				out, found = append(out, c), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-clients: no client %q", name)
		}
	}
	return out, nil
}

// slug names a scenario or a client on the command line and in file
// names: lower case, dashes for spaces, no commas.
func slug(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(strings.ToLower(name), ",", ""), " ", "-")
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "outage:", msg)
	os.Exit(2)
}
