// Command hedge measures hedged GETs against a loopback server with a slow
// tail: idem's hedging (a fixed delay and a percentile of the host's recent
// latencies, with and without its bound on hedges in flight) beside
// failsafe-go's hedge policy (with and without its hedge budget), in one
// process, on the same server and the same request sequence, variant after
// variant in each round:
//
//	cd bench/hedge && go run . -rounds 21
//
// The server answers at once, except that a seeded draw per (call,
// attempt) makes -slow of the attempts (2%) take -tail (200 ms): a hedge of
// a slow attempt is drawn anew, as a second server instance would be. So
// every variant sees the same slow first attempts. Each round runs every
// variant once, starting one variant later than the round before, and each
// run starts cold (a fresh client and policy). Each variant sends -calls
// GETs (2,000) from -workers goroutines (8) over a fresh http.Transport,
// and the table gives the p50 and p99 of the calls' latencies and the
// requests the server received per call, the connections the client
// dialled (a cancelled HTTP/1.1 request closes its connection) and, for
// idem, the hedges its default retry budget denied (hedges spend it). The
// program has a go.mod of its
// own, so that idem does not depend on failsafe-go.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"

	"github.com/idemkit/idem"
)

// settings are the command line.
type settings struct {
	calls, workers, rounds int
	slow                   float64
	tail, fixed            time.Duration
	seed                   uint64
	window, minSamples     int
}

func main() {
	var s settings
	flag.IntVar(&s.calls, "calls", 2000, "GETs per variant")
	flag.IntVar(&s.workers, "workers", 8, "concurrent callers")
	flag.IntVar(&s.rounds, "rounds", 3, "rounds; each runs every variant once, in turn")
	flag.Float64Var(&s.slow, "slow", 0.02, "share of attempts that are slow")
	flag.DurationVar(&s.tail, "tail", 200*time.Millisecond, "latency of a slow attempt")
	flag.DurationVar(&s.fixed, "fixed", 10*time.Millisecond, "the fixed hedge delay")
	flag.Uint64Var(&s.seed, "seed", 1, "seed of the slow draws")
	flag.IntVar(&s.window, "window", 256, "latencies a percentile hedge reads (idem's Window, failsafe-go's quantile age)")
	flag.IntVar(&s.minSamples, "min-samples", 32, "latencies before a percentile hedge starts (idem's MinSamples, failsafe-go's execution threshold)")
	flag.Parse()
	if s.calls <= 0 || s.workers <= 0 || s.rounds <= 0 || s.window <= 0 || s.minSamples <= 0 {
		fmt.Fprintln(os.Stderr, "hedge: -calls, -workers, -rounds, -window and -min-samples must be positive")
		os.Exit(2)
	}
	srv, err := startServer(s.seed, s.slow, s.tail)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hedge:", err)
		os.Exit(1)
	}
	defer srv.close()
	vs := variants(s)
	results := make([][]figures, len(vs))
	for r := range s.rounds {
		for k := range vs { // each round starts one variant later, so that none always runs first
			i := (r + k) % len(vs)
			results[i] = append(results[i], run(srv, vs[i], s))
		}
	}
	report(os.Stdout, s, vs, results)
}

// variant is one client under test.
type variant struct {
	name string
	// client returns the RoundTripper of a run over base, and a function
	// that counts the hedges its retry budget denied (nil for none).
	client func(base *http.Transport) (http.RoundTripper, func() int64)
}

func variants(s settings) []variant {
	idemWith := func(h idem.HedgeConfig) func(*http.Transport) (http.RoundTripper, func() int64) {
		return func(base *http.Transport) (http.RoundTripper, func() int64) {
			budget := idem.NewBudget(idem.BudgetConfig{}) // the default, as the Transport's own would be
			denied := func() int64 { return budget.Stats().Denied }
			return idem.NewTransport(idem.Config{Base: base, Budget: budget, Hedge: h}), denied
		}
	}
	unbudgeted := func(h idem.HedgeConfig) func(*http.Transport) (http.RoundTripper, func() int64) {
		return func(base *http.Transport) (http.RoundTripper, func() int64) {
			return idem.NewTransport(idem.Config{Base: base, NoBudget: true, Hedge: h}), nil
		}
	}
	percentile := func(p float64) idem.HedgeConfig {
		return idem.HedgeConfig{Percentile: p, Window: s.window, MinSamples: s.minSamples}
	}
	unbounded := func(h idem.HedgeConfig) idem.HedgeConfig {
		h.InFlightShare = 1 // one hedge per attempt in flight
		return h
	}
	// A policy is built per run, as idem's Transport is: a quantile policy
	// learns latencies, and each run must start cold.
	failsafeWith := func(policy func() failsafe.Policy[*http.Response]) func(*http.Transport) (http.RoundTripper, func() int64) {
		return func(base *http.Transport) (http.RoundTripper, func() int64) {
			return failsafehttp.NewRoundTripper(base, policy()), nil
		}
	}
	quantile := func(q float64) func() failsafe.Policy[*http.Response] {
		return func() failsafe.Policy[*http.Response] {
			return hedgepolicy.NewWithDelayQuantile[*http.Response](q, uint(s.window), uint(s.minSamples))
		}
	}
	// failsafe-go's hedge budget bounds the hedges in flight much as idem's
	// InFlightShare does by default (a tenth of the executions in flight,
	// and at least one), but per policy rather than per host, and it
	// checks the rate before counting the new hedge; with one host and 8
	// workers both allow one hedge at a time.
	bounded := func(q float64) func() failsafe.Policy[*http.Response] {
		return func() failsafe.Policy[*http.Response] {
			return hedgepolicy.NewBuilderWithDelayQuantile[*http.Response](q, uint(s.window), uint(s.minSamples)).
				WithBudget(budget.NewBuilder().WithMaxRate(0.1).WithMinConcurrency(1).Build()).Build()
		}
	}
	fixed := func() failsafe.Policy[*http.Response] { return hedgepolicy.NewWithDelay[*http.Response](s.fixed) }
	return []variant{
		{"net/http, no hedging", func(base *http.Transport) (http.RoundTripper, func() int64) { return base, nil }},
		{"idem, no hedging", idemWith(idem.HedgeConfig{})},
		{fmt.Sprintf("idem, fixed %s", s.fixed), idemWith(idem.HedgeConfig{Delay: s.fixed})},
		{"idem, p90", idemWith(percentile(0.90))},
		{"idem, p95", idemWith(percentile(0.95))},
		{"idem, p90, no budget", unbudgeted(percentile(0.90))},
		{"idem, p90, no in-flight bound", idemWith(unbounded(percentile(0.90)))},
		{fmt.Sprintf("failsafe-go, fixed %s", s.fixed), failsafeWith(fixed)},
		{"failsafe-go, p90", failsafeWith(quantile(0.90))},
		{"failsafe-go, p95", failsafeWith(quantile(0.95))},
		{"failsafe-go, p90, hedge budget 0.1", failsafeWith(bounded(0.90))},
	}
}

// figures are what one run of a variant measured.
type figures struct {
	p50, p99, max   time.Duration
	requestsPerCall float64
	errors          int
	denied          int64 // hedges the budget denied
	dials           int64 // connections the client opened
}

// run sends s.calls GETs through a fresh client of v, from s.workers
// goroutines, and measures them.
func run(srv *server, v variant, s settings) figures {
	srv.reset()
	var dials atomic.Int64
	var dialer net.Dialer
	base := &http.Transport{MaxIdleConnsPerHost: 4 * s.workers, DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1) // a cancelled request closes its connection: hedging costs dials
			return dialer.DialContext(ctx, network, addr)
		}}
	defer base.CloseIdleConnections()
	rt, denied := v.client(base)
	client := &http.Client{Transport: rt}
	latencies := make([]time.Duration, s.calls)
	var next atomic.Int64
	var errs atomic.Int64
	var wg sync.WaitGroup
	for range s.workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= s.calls {
					return
				}
				start := time.Now()
				if err := get(client, srv.url+strconv.Itoa(i)); err != nil {
					errs.Add(1)
				}
				latencies[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	slices.Sort(latencies)
	at := func(q float64) time.Duration { return latencies[int(q*float64(len(latencies)-1)+0.5)] }
	f := figures{
		p50: at(0.50), p99: at(0.99), max: latencies[len(latencies)-1],
		requestsPerCall: float64(srv.requests.Load()) / float64(s.calls),
		errors:          int(errs.Load()),
		dials:           dials.Load(),
	}
	if denied != nil {
		f.denied = denied()
	}
	return f
}

func get(client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// server is the loopback server: a seeded share of attempts is slow.
type server struct {
	url      string
	srv      *http.Server
	seed     uint64
	slow     float64
	tail     time.Duration
	requests atomic.Int64

	mu       sync.Mutex
	attempts map[string]uint64 // per call path
}

func startServer(seed uint64, slow float64, tail time.Duration) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{url: "http://" + l.Addr().String() + "/item/", seed: seed, slow: slow, tail: tail,
		attempts: map[string]uint64{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(l)
	return s, nil
}

func (s *server) close() { s.srv.Close() }

// reset forgets the attempts and requests of the previous run.
func (s *server) reset() {
	s.mu.Lock()
	clear(s.attempts)
	s.mu.Unlock()
	s.requests.Store(0)
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.mu.Lock()
	s.attempts[r.URL.Path]++
	attempt := s.attempts[r.URL.Path]
	s.mu.Unlock()
	if s.isSlow(r.URL.Path, attempt) {
		t := time.NewTimer(s.tail)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done(): // the client cancelled a losing hedge
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, "ok\n")
}

// isSlow draws whether an attempt of a call is slow: a pure function of
// (seed, path, attempt).
func (s *server) isSlow(path string, attempt uint64) bool {
	h := s.seed ^ attempt*0x9e3779b97f4a7c15
	for i := 0; i < len(path); i++ {
		h = (h ^ uint64(path[i])) * 0x100000001b3
	}
	return float64(splitmix(h)>>11)/(1<<53) < s.slow
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// report prints, per variant, the median over rounds of each figure, with
// the lowest and highest round's in brackets.
func report(out io.Writer, s settings, vs []variant, results [][]figures) {
	fmt.Fprintf(out, "%d GETs per variant, %d workers, %.0f%% of attempts %s, seed %d, %d rounds: median [lowest, highest round]\n\n",
		s.calls, s.workers, s.slow*100, s.tail, s.seed, s.rounds)
	w := tabwriter.NewWriter(out, 0, 0, 1, ' ', 0)
	fmt.Fprintln(w, "| variant\t| p50\t| p99\t| requests per call\t| max\t| dials\t| errors\t| hedges denied by the budget\t|")
	fmt.Fprintln(w, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
	for i, v := range vs {
		rs := results[i]
		var errs int
		var denied int64
		for _, f := range rs {
			errs += f.errors
			denied += f.denied
		}
		fmt.Fprintf(w, "| %s\t| %s\t| %s\t| %s\t| %s\t| %s\t| %d\t| %d\t|\n", v.name,
			spread(rs, func(f figures) float64 { return float64(f.p50) }, duration),
			spread(rs, func(f figures) float64 { return float64(f.p99) }, duration),
			spread(rs, func(f figures) float64 { return f.requestsPerCall }, func(x float64) string { return fmt.Sprintf("%.3f", x) }),
			spread(rs, func(f figures) float64 { return float64(f.max) }, duration),
			spread(rs, func(f figures) float64 { return float64(f.dials) }, func(x float64) string { return fmt.Sprintf("%.0f", x) }),
			errs, denied)
	}
	w.Flush()
}

// spread formats the median of a figure over the rounds, and its lowest and
// highest round.
func spread(rs []figures, get func(figures) float64, format func(float64) string) string {
	var all []float64
	for _, f := range rs {
		all = append(all, get(f))
	}
	slices.Sort(all)
	return fmt.Sprintf("%s [%s, %s]", format(all[len(all)/2]), format(all[0]), format(all[len(all)-1]))
}

func duration(ns float64) string { return round(time.Duration(ns)).String() }

// round keeps three significant digits, enough to read and to compare.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
