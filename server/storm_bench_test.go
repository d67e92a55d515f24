package server

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/wire"
)

// stormSize is the number of concurrent requests with one key in a storm.
var stormSize = flag.Int("bench.storm", 1000, "BenchmarkDuplicateStorm: concurrent requests with one key")

// BenchmarkDuplicateStorm sends storms of -bench.storm (1,000) concurrent
// requests that all carry one new key and one body, each storm released
// at once over 1,000 warm loopback connections, to the payment endpoint of
// BenchmarkPayment behind the middleware over Postgres (the same 24
// connection pool, default Config: a duplicate waits up to 2 s for the
// first's transaction). It fails unless every storm ends with exactly one
// execution and one payment row, and every other request gets the replay
// (201, byte-identical) or 409 key-in-flight. It reports per storm:
// executions, replays and 409s, and the wall time from release to the last
// answer; and the p50 and p99 latency of single requests.
//
//	go test -run '^$' -bench BenchmarkDuplicateStorm -benchtime 20x ./server/
//	go test -run '^$' -bench BenchmarkDuplicateStorm -benchtime 20x ./server/ -args -bench.storm=100
func BenchmarkDuplicateStorm(b *testing.B) {
	pool, _ := benchPool(b)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", idemPayments(pool))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *stormSize, MaxIdleConns: *stormSize}}
	defer client.CloseIdleConnections()
	storm(b, client, srv.URL, uuid.NewString()) // warm up: opens the connections

	var total stormTally
	var latencies []time.Duration
	var wall time.Duration
	b.ResetTimer()
	for range b.N {
		t, lat, took := storm(b, client, srv.URL, uuid.NewString())
		total.add(t)
		latencies = append(latencies, lat...)
		wall += took
	}
	b.StopTimer()
	var rows int
	if err := pool.QueryRow(b.Context(), `SELECT count(*) FROM payments`).Scan(&rows); err != nil {
		b.Fatal(err)
	}
	if rows != b.N+1 { // the warm-up storm paid once too
		b.Fatalf("%d payment rows after %d storms, want one per storm", rows, b.N+1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(total.executed)/n, "executions/storm")
	b.ReportMetric(float64(total.replayed)/n, "replays/storm")
	b.ReportMetric(float64(total.conflicts)/n, "409s/storm")
	b.ReportMetric(float64(wall.Microseconds())/1000/n, "wall-ms/storm")
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op") // a storm's wall time is the figure
}

// stormTally counts how the requests of storms ended.
type stormTally struct{ executed, replayed, conflicts int }

func (t *stormTally) add(o stormTally) {
	t.executed += o.executed
	t.replayed += o.replayed
	t.conflicts += o.conflicts
}

// storm sends *stormSize identical requests with key at once, and returns
// how they ended, their latencies and the storm's wall time.
func storm(b *testing.B, client *http.Client, url, key string) (stormTally, []time.Duration, time.Duration) {
	b.Helper()
	n := *stormSize
	results := make([]stormResult, n)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	ready.Add(n)
	for i := range n {
		done.Go(func() {
			ready.Done()
			<-start
			results[i] = stormRequest(client, url, key)
		})
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	took := time.Since(t0)
	tally, latencies := tallyStorm(b, results)
	return tally, latencies, took
}

// tallyStorm counts how the requests of a storm ended, and fails unless
// exactly one executed and every other replayed its body or got 409.
func tallyStorm(b *testing.B, results []stormResult) (stormTally, []time.Duration) {
	b.Helper()
	var tally stormTally
	var body string
	latencies := make([]time.Duration, 0, len(results))
	for i, r := range results {
		latencies = append(latencies, r.latency)
		switch {
		case r.err != nil:
			b.Fatalf("storm request %d: %v", i, r.err)
		case r.status == http.StatusCreated && !r.replayed:
			tally.executed++
		case r.status == http.StatusCreated:
			tally.replayed++
		case r.status == http.StatusConflict && r.problem == wire.ProblemKeyInFlight:
			tally.conflicts++
			continue
		default:
			b.Fatalf("storm request %d: %d %s, want 201 or 409 key-in-flight", i, r.status, r.body)
		}
		if body == "" {
			body = r.body
		} else if r.body != body {
			b.Fatalf("storm request %d: body %q, want the execution's %q", i, r.body, body)
		}
	}
	if tally.executed != 1 {
		b.Fatalf("storm: %d executions, want 1 (%d replays, %d 409s)", tally.executed, tally.replayed, tally.conflicts)
	}
	return tally, latencies
}

type stormResult struct {
	status   int
	replayed bool
	problem  string
	body     string
	latency  time.Duration
	err      error
}

func stormRequest(client *http.Client, url, key string) stormResult {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/payments", strings.NewReader(`{"account":7,"amount":25}`))
	if err != nil {
		return stormResult{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.HeaderKey, key)
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return stormResult{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	r := stormResult{status: resp.StatusCode, replayed: resp.Header.Get(wire.HeaderReplayed) == "true",
		body: string(raw), latency: time.Since(t0), err: err}
	if p, ok := wire.ReadProblem(resp.Header.Get("Content-Type"), strings.NewReader(r.body), 1<<16); ok {
		r.problem = p.Name()
	}
	if err == nil && r.status >= 500 {
		r.err = fmt.Errorf("status %d: %s", r.status, raw)
	}
	return r
}
