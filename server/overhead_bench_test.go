package server

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// overheadChunk is the number of requests of one turn of a variant.
const overheadChunk = 1000

// overheadAA runs BenchmarkPaymentOverhead with the plain endpoint in both
// variants: its ratios then show the benchmark's own noise.
var overheadAA = flag.Bool("bench.aa", false, "BenchmarkPaymentOverhead: plain against plain, to see the noise")

// BenchmarkPaymentOverhead measures the goal "server with middleware >= 80%
// of the throughput without it" on a machine shared with other work: the
// payment endpoint of BenchmarkPayment, plain and behind the middleware
// (new key per request), on one pool, at one concurrency
// (-bench.parallelism goroutines per CPU), taking turns of 1,000 requests
// in the order plain, idem, idem, plain, ... so that a drift of the
// machine's load falls on both alike. b.N is the number of requests of
// each variant. It reports each variant's req/s and CPU per request (this
// process, client included, plus the pool's Postgres backends; the
// backends' share apart as -pg-cpu-us/req), and two
// ratios: "tput-%", idem req/s over plain req/s, and "cpu-%", plain CPU per
// request over idem CPU per request, which is the throughput ratio when the
// CPU is the bottleneck, as on this machine, and the steadier of the two.
// With -bench.aa both variants are the plain endpoint, and the ratios show
// the benchmark's noise.
//
//	go test -run '^$' -bench BenchmarkPaymentOverhead -benchtime 20000x -count 5 ./server/
func BenchmarkPaymentOverhead(b *testing.B) {
	pool, app := benchPool(b)
	cpu := cpuMeter{pool: pool, app: app}
	variants := [2]*overheadVariant{
		{name: "plain", h: plainPayments(pool)},
		{name: "idem", h: idemPayments(pool)},
	}
	if *overheadAA {
		variants[1].h = plainPayments(pool)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	for _, v := range variants {
		mux := http.NewServeMux()
		mux.Handle("POST /v1/payments", v.h)
		v.srv = httptest.NewServer(mux)
		defer v.srv.Close()
	}
	workers := *benchParallelism * runtime.GOMAXPROCS(0)
	b.ResetTimer()
	for turn := 0; turn*overheadChunk/2 < b.N; turn++ {
		v := variants[(turn+turn/2)%2] // plain, idem, idem, plain, plain, idem, ...
		n := min(overheadChunk, b.N-v.requests)
		if n <= 0 {
			continue
		}
		before := cpu.read(b)
		start := time.Now()
		v.run(b, client, n, workers)
		v.wall += time.Since(start)
		self, pg := cpu.used(b, before)
		v.cpu += self + pg
		v.pgCPU += pg
		v.requests += n
	}
	b.StopTimer()
	plain, idem := variants[0], variants[1]
	for _, v := range variants {
		b.ReportMetric(float64(v.requests)/v.wall.Seconds(), v.name+"-req/s")
		b.ReportMetric(v.cpuPerRequest(), v.name+"-cpu-us/req")
		b.ReportMetric(float64(v.pgCPU.Microseconds())/float64(v.requests), v.name+"-pg-cpu-us/req")
	}
	b.ReportMetric(100*float64(idem.requests)/idem.wall.Seconds()/(float64(plain.requests)/plain.wall.Seconds()), "tput-%")
	b.ReportMetric(100*plain.cpuPerRequest()/idem.cpuPerRequest(), "cpu-%")
	b.ReportMetric(0, "ns/op")
}

// overheadVariant is one server of BenchmarkPaymentOverhead and what its
// turns measured.
type overheadVariant struct {
	name     string
	h        http.Handler
	srv      *httptest.Server
	requests int
	wall     time.Duration
	cpu      time.Duration // this process and the backends
	pgCPU    time.Duration // the backends
}

func (v *overheadVariant) cpuPerRequest() float64 {
	return float64(v.cpu.Microseconds()) / float64(v.requests)
}

// run posts n payments with new keys from workers goroutines.
func (v *overheadVariant) run(b *testing.B, client *http.Client, n, workers int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := postPayment(client, v.srv.URL, uuid.NewString(), i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
