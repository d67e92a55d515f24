// Command storm measures retry amplification during a full outage: a
// loopback server answers 503 to every request while logical operations
// (keyed POSTs) arrive at a steady rate, each through the idem Transport with
// real backoff waits. It prints the requests that reached the server per
// logical operation, for the Transport without a budget, with the default
// budget, and with the default stack (budget and breaker). Each operation
// has a deadline (-deadline, 10 s): a retry without a token waits for one
// until then, and an open breaker holds the call until then.
//
//	go run ./bench/storm                  # 2,500 operations at 500/s
//	go run ./bench/storm -ops 10000 -rate 1000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem"
)

func main() {
	ops := flag.Int("ops", 2500, "logical operations per scenario")
	rate := flag.Int("rate", 500, "operations started per second")
	deadline := flag.Duration("deadline", 10*time.Second, "each operation's deadline")
	flag.Parse()
	if *ops <= 0 || *rate <= 0 || *deadline <= 0 {
		fmt.Fprintln(os.Stderr, "storm: -ops, -rate and -deadline must be positive")
		os.Exit(2)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\toperations\trequests\trequests/op\tbudget denials\tbreaker refusals\tseconds\t")
	for _, s := range scenarios() {
		r := run(s, *ops, *rate, *deadline)
		fmt.Fprintf(w, "%s\t%d\t%d\t%.3f\t%d\t%d\t%.1f\t\n", s.name, *ops, r.requests,
			float64(r.requests)/float64(*ops), r.denied, r.refused, r.elapsed.Seconds())
	}
	w.Flush()
}

type scenario struct {
	name string
	cfg  func(*idem.Budget) idem.Config
}

func scenarios() []scenario {
	noBreaker := idem.BreakerConfig{Disabled: true}
	return []scenario{
		{"no budget", func(*idem.Budget) idem.Config { return idem.Config{NoBudget: true, Breaker: noBreaker} }},
		{"default budget", func(b *idem.Budget) idem.Config { return idem.Config{Budget: b, Breaker: noBreaker} }},
		{"budget + breaker", func(b *idem.Budget) idem.Config { return idem.Config{Budget: b} }},
	}
}

type outcome struct {
	requests, denied, refused int64
	elapsed                   time.Duration
}

// run starts ops operations at rate per second against a server that is
// down, and counts what reached it.
func run(s scenario, ops, rate int, deadline time.Duration) outcome {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	budget := idem.NewBudget(idem.BudgetConfig{})
	var refused atomic.Int64
	cfg := s.cfg(budget)
	cfg.Observer.OnGiveUp = func(_ idem.Attempt, err error) {
		if errors.Is(err, idem.ErrCircuitOpen) {
			refused.Add(1)
		}
	}
	client := idem.NewClient(cfg)
	defer client.CloseIdleConnections()

	start := time.Now()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	for range ops {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"amount_cents":100}`))
			if resp, err := client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	return outcome{requests: hits.Load(), denied: budget.Stats().Denied, refused: refused.Load(), elapsed: time.Since(start)}
}
