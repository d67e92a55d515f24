package server

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/fingerprint"
)

// overheadChunk is the number of requests of one turn of a variant.
const overheadChunk = 1000

// overheadAA runs BenchmarkPaymentOverhead with the plain endpoint in both
// variants: its ratios then show the benchmark's own noise.
var overheadAA = flag.Bool("bench.aa", false, "BenchmarkPaymentOverhead: plain against plain, to see the noise")

// overheadSQLOnly runs BenchmarkPaymentOverhead with sqlOnlyPayments in
// place of the middleware: the most the middleware could keep with its
// statements.
var overheadSQLOnly = flag.Bool("bench.sqlonly", false, "BenchmarkPaymentOverhead: the middleware's statements without its Go work")

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
// the benchmark's noise; with -bench.sqlonly the second is sqlOnlyPayments.
//
//	go test -run '^$' -bench BenchmarkPaymentOverhead -benchtime 20000x -count 5 ./server/
func BenchmarkPaymentOverhead(b *testing.B) {
	pool, app := benchPool(b)
	cpu := cpuMeter{pool: pool, app: app}
	variants := [2]*overheadVariant{
		{name: "plain", h: plainPayments(pool)},
		{name: "idem", h: idemPayments(pool)},
	}
	switch {
	case *overheadAA:
		variants[1].h = plainPayments(pool)
	case *overheadSQLOnly:
		variants[1].h = sqlOnlyPayments(pool)
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

// sqlOnlyPayments is the payment endpoint with the statements of the
// Transactional middleware for a new key and little of its Go work: the
// claim (BEGIN, the scope's lock, the record's read) and the record's
// write with COMMIT go over the store's wire path around pay, but nothing
// reads or fingerprints the body, the response is buffered plainly, and
// the record stored is a fixed one. Its ratio to plain is about the most
// the middleware could keep with these statements.
func sqlOnlyPayments(pool *pgxpool.Pool) http.Handler {
	s := NewPostgresStore(pool)
	const route = "POST /v1/payments"
	record := &Response{Status: http.StatusCreated,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"id":1,"account":1,"amount":1,"status":"paid"}`)}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, key := r.Context(), r.Header.Get("Idempotency-Key")
		c := &Claim{Scope: fingerprint.Scope("", "", route, key), Route: route, Key: key,
			Digest: make([]byte, 32), DigestAlg: fingerprint.Alg, Retention: defaultRetention}
		conn, err := pool.Acquire(ctx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		a := &pgTxAttempt{s: s, conn: conn, c: c, token: uuid.New(), n: 1, fresh: true}
		locked, f, err := s.begin(ctx, conn.Conn(), c)
		if err == nil && (!locked || f != nil) {
			err = fmt.Errorf("key %s: not a new key", key)
		}
		buf := &bufferedWriter{header: http.Header{}}
		if err == nil {
			err = pay(buf, r, &connTx{conn: conn.Conn()})
		}
		if err == nil {
			err = a.store(ctx, record)
		}
		_ = endTx(ctx, conn)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		copyHeader(w.Header(), buf.header)
		w.WriteHeader(buf.status)
		_, _ = w.Write(buf.body.Bytes())
	})
}

// bufferedWriter keeps a response until the transaction commits.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header         { return b.header }
func (b *bufferedWriter) WriteHeader(status int)      { b.status = status }
func (b *bufferedWriter) Write(p []byte) (int, error) { return b.body.Write(p) }
