package idem

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/proccpu"
)

// The client stack's cost per successful request, against its bare twin:
//
//	go test -run '^$' -bench 'Transport$' -benchmem -count 6 .
//
// Both send the same keyed POST to the same loopback server over a private
// http.Transport with keep-alive; the difference is the stack.

func BenchmarkTransport(b *testing.B) {
	benchmarkPOST(b, func(base *http.Transport) http.RoundTripper {
		return NewTransport(Config{Base: base})
	})
}

func BenchmarkBareTransport(b *testing.B) {
	benchmarkPOST(b, func(base *http.Transport) http.RoundTripper {
		return keyedBare{base}
	})
}

// keyedBare adds a key the way a careful caller would without idem, so that
// the twin sends the same bytes.
type keyedBare struct{ base http.RoundTripper }

func (k keyedBare) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(KeyHeader, NewKey())
	return k.base.RoundTrip(r)
}

func benchmarkPOST(b *testing.B, stack func(*http.Transport) http.RoundTripper) {
	srv := newBenchServer(b)
	base := &http.Transport{MaxIdleConnsPerHost: 4}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: stack(base)}
	b.ReportAllocs()
	cpu := proccpu.Used()
	defer func() { b.ReportMetric(float64((proccpu.Used()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op") }()
	for b.Loop() {
		postOnce(b, client, srv.URL)
	}
}

// BenchmarkTransportPaired sends a request through the stack and one
// through its bare twin in turn (each over its own http.Transport, to one
// loopback server), the order swapped every round, and times each request,
// so that the drift of a shared machine hits both alike; overhead-ns/req is
// the stack's added wall time per request. Its noise is much smaller than
// that of separate runs: with the bare twin in place of the stack it reads
// within a few hundred ns of zero.
func BenchmarkTransportPaired(b *testing.B) {
	srv := newBenchServer(b)
	stackBase := &http.Transport{MaxIdleConnsPerHost: 4}
	bareBase := &http.Transport{MaxIdleConnsPerHost: 4}
	defer stackBase.CloseIdleConnections()
	defer bareBase.CloseIdleConnections()
	stack := &http.Client{Transport: NewTransport(Config{Base: stackBase})}
	bare := &http.Client{Transport: keyedBare{bareBase}}
	benchmarkPaired(b, stack, bare, srv.URL)
}

// benchmarkPaired sends the benchmark's POST to url with stack and with
// bare in turn, the order swapped every round, times each, and reports
// their time per request and the difference.
func benchmarkPaired(b *testing.B, stack, bare *http.Client, url string) {
	timed := func(c *http.Client) time.Duration {
		start := time.Now()
		postOnce(b, c, url)
		return time.Since(start)
	}
	var inStack, inBare time.Duration
	rounds := 0
	for b.Loop() {
		if rounds%2 == 0 {
			inStack += timed(stack)
			inBare += timed(bare)
		} else {
			inBare += timed(bare)
			inStack += timed(stack)
		}
		rounds++
	}
	perReq := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(rounds) }
	b.ReportMetric(perReq(inStack), "stack-ns/req")
	b.ReportMetric(perReq(inBare), "bare-ns/req")
	b.ReportMetric(perReq(inStack-inBare), "overhead-ns/req")
}

// newBenchServer starts a loopback server that answers each POST with a
// small 201, as a payment API would; it is closed when b ends.
func newBenchServer(b *testing.B) *httptest.Server {
	const reply = `{"payment_id":"pay_0123456789","status":"succeeded"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, reply)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// postOnce sends the benchmark's keyed POST with client and reads the reply.
func postOnce(b *testing.B, client *http.Client, url string) {
	const body = `{"account_id":"acc_1","amount_cents":1250,"currency":"EUR"}`
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// The stack's own cost, without the network's noise: the same two stacks
// over an in-memory base that answers at once.
//
//	go test -run '^$' -bench 'InMemory$' -benchmem -count 10 .

func BenchmarkTransportInMemory(b *testing.B) {
	benchmarkInMemory(b, NewTransport(Config{Base: instantBase{}}))
}

func BenchmarkBareTransportInMemory(b *testing.B) {
	benchmarkInMemory(b, keyedBare{instantBase{}})
}

// instantBase answers every request with a small 201, as a server would.
type instantBase struct{}

func (instantBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	const reply = `{"payment_id":"pay_0123456789","status":"succeeded"}`
	return &http.Response{
		StatusCode: http.StatusCreated, ContentLength: int64(len(reply)), Request: r,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(reply)),
	}, nil
}

func benchmarkInMemory(b *testing.B, rt http.RoundTripper) {
	client := &http.Client{Transport: rt}
	body := `{"account_id":"acc_1","amount_cents":1250,"currency":"EUR"}`
	b.ReportAllocs()
	// The process's CPU time per call: steadier than ns/op on a busy
	// machine, where the benchmark waits for a core.
	cpu := proccpu.Used()
	defer func() { b.ReportMetric(float64((proccpu.Used()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op") }()
	for b.Loop() {
		resp, err := client.Post("http://api.test/v1/payments", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkTransportInMemoryPaired sends a request through the stack and
// one through its bare twin in turn, over the in-memory base, the order
// swapped every round, and times each, so that a busy machine's drift hits
// both alike; overhead-ns/req is the stack's own cost per request:
//
//	go test -run '^$' -bench 'InMemoryPaired$' -benchtime 200000x -count 10 .
func BenchmarkTransportInMemoryPaired(b *testing.B) {
	stack := &http.Client{Transport: NewTransport(Config{Base: instantBase{}})}
	bare := &http.Client{Transport: keyedBare{instantBase{}}}
	benchmarkPaired(b, stack, bare, "http://api.test/v1/payments")
}
