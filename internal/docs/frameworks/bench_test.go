package frameworks

import (
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	echo4 "github.com/labstack/echo/v4"
	echo5 "github.com/labstack/echo/v5"

	"github.com/idemkit/idem/echo5idem"
	"github.com/idemkit/idem/echoidem"
	"github.com/idemkit/idem/ginidem"
	"github.com/idemkit/idem/internal/proccpu"
	"github.com/idemkit/idem/server"
)

// The benchmarks' operation: a POST whose handler answers 201 with a
// payment encoded once, so that every app does the same work.
var (
	benchPayment = []byte(`{"payment_id":1}`)
	benchURL     = &url.URL{Path: "/v1/accounts/1/payments"}
	benchBody    = `{"amount_cents":100}`
)

// benchApps are the apps compared: the net/http middleware behind Go's
// ServeMux, and each adapter behind its framework's router, each over a
// MemoryStore of its own; with a nil store, the same app without idem.
var benchApps = []struct {
	name  string
	build func(server.Store) http.Handler
}{
	{"net-http", func(store server.Store) http.Handler {
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(benchPayment)
		})
		if store != nil {
			h = server.Middleware(store, server.Config{})(h)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /v1/accounts/{id}/payments", h)
		return mux
	}},
	{"gin", func(store server.Store) http.Handler {
		h := []gin.HandlerFunc{func(c *gin.Context) { c.Data(http.StatusCreated, "application/json", benchPayment) }}
		if store != nil {
			h = append([]gin.HandlerFunc{ginidem.Middleware(store, ginidem.Config{})}, h...)
		}
		r := gin.New()
		r.POST("/v1/accounts/:id/payments", h...)
		return r
	}},
	{"echo4", func(store server.Store) http.Handler {
		var mw []echo4.MiddlewareFunc
		if store != nil {
			mw = append(mw, echoidem.Middleware(store, echoidem.Config{}))
		}
		e := echo4.New()
		e.POST("/v1/accounts/:id/payments", func(c echo4.Context) error {
			return c.JSONBlob(http.StatusCreated, benchPayment)
		}, mw...)
		return e
	}},
	{"echo5", func(store server.Store) http.Handler {
		var mw []echo5.MiddlewareFunc
		if store != nil {
			mw = append(mw, echo5idem.Middleware(store, echo5idem.Config{}))
		}
		e := echo5.New()
		e.POST("/v1/accounts/:id/payments", func(c *echo5.Context) error {
			return c.JSONBlob(http.StatusCreated, benchPayment)
		}, mw...)
		return e
	}},
}

// benchWriter is a ResponseWriter that keeps nothing but its header map,
// cleared for each request, so that the benchmark measures the app.
type benchWriter struct{ h http.Header }

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(int)             {}

// benchRequest is a keyed POST, built as cheaply as a server would.
func benchRequest(key string) *http.Request {
	return &http.Request{
		Method: http.MethodPost, URL: benchURL, RequestURI: benchURL.Path, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Idempotency-Key": {key}, "Content-Type": {"application/json"}},
		Body:          io.NopCloser(strings.NewReader(benchBody)),
		ContentLength: int64(len(benchBody)), Host: "example.com",
	}
}

// benchKeys are n keys, made before the clock starts.
func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	return keys
}

// benchServe serves keys[i] (or "k" when keys is nil) b.N times to h,
// and reports the process's CPU time per request beside the wall time.
func benchServe(b *testing.B, h http.Handler, keys []string) {
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := proccpu.Used()
	for i := 0; i < b.N; i++ {
		key := "k"
		if keys != nil {
			key = keys[i]
		}
		clear(w.h)
		h.ServeHTTP(w, benchRequest(key))
	}
	b.ReportMetric(float64((proccpu.Used()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkFirstRequest: a request with a new key, which runs the handler
// and stores its response.
//
//	cd internal/docs/frameworks && go test -run '^$' -bench 'FirstRequest|Replay' -benchmem -benchtime 20000x -count 10
func BenchmarkFirstRequest(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	for _, app := range benchApps {
		b.Run(app.name, func(b *testing.B) {
			benchServe(b, app.build(server.NewMemoryStore()), benchKeys(b.N))
		})
	}
}

// BenchmarkReplay: a retry of a stored request, answered from the store.
func BenchmarkReplay(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	for _, app := range benchApps {
		b.Run(app.name, func(b *testing.B) {
			h := app.build(server.NewMemoryStore())
			h.ServeHTTP(&benchWriter{h: http.Header{}}, benchRequest("k"))
			benchServe(b, h, nil)
		})
	}
}

// BenchmarkPaired serves, in each round, one request through the net/http
// middleware and one through an adapter, each over its own MemoryStore,
// and one through each of the two apps without idem, the order reversed
// every round. It reports the median time per request of each (the time
// of a request that the machine's other load did not preempt), the
// adapter app's time beside the net/http one's (overhead-%), and what
// idem adds to each app's own time, the adapter's beside the
// middleware's (idem-overhead-%): the first compares whole apps, router
// included, the second idem's part in them.
//
//	cd internal/docs/frameworks && go test -run '^$' -bench Paired -benchtime 20000x -count 5
func BenchmarkPaired(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	base := benchApps[0]
	for _, app := range benchApps[1:] {
		for _, first := range []bool{true, false} {
			name := app.name + "/replay"
			if first {
				name = app.name + "/first"
			}
			b.Run(name, func(b *testing.B) {
				benchPaired(b, []http.Handler{
					base.build(server.NewMemoryStore()), app.build(server.NewMemoryStore()), base.build(nil), app.build(nil),
				}, first)
			})
		}
	}
}

// benchPaired times b.N rounds of one request to each of apps (the
// middleware's, the adapter's, and the two without idem), with new keys
// when first is true, else with a stored one.
func benchPaired(b *testing.B, apps []http.Handler, first bool) {
	keys := []string(nil)
	if first {
		keys = benchKeys(b.N)
	} else {
		for _, h := range apps {
			h.ServeHTTP(&benchWriter{h: http.Header{}}, benchRequest("k"))
		}
	}
	w := &benchWriter{h: http.Header{}}
	times := make([][]time.Duration, len(apps))
	for j := range times {
		times[j] = make([]time.Duration, b.N)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := "k"
		if first {
			key = keys[i]
		}
		for k := range apps {
			j := k
			if i%2 == 1 {
				j = len(apps) - 1 - k
			}
			clear(w.h)
			r := benchRequest(key)
			start := time.Now()
			apps[j].ServeHTTP(w, r)
			times[j][i] = time.Since(start)
		}
	}
	m := make([]float64, len(apps))
	for j := range times {
		m[j] = float64(median(times[j]).Nanoseconds())
	}
	b.ReportMetric(m[0], "net-http-ns/op")
	b.ReportMetric(m[1], "adapter-ns/op")
	b.ReportMetric(100*(m[1]-m[0])/m[0], "overhead-%")
	b.ReportMetric(100*((m[1]-m[3])-(m[0]-m[2]))/(m[0]-m[2]), "idem-overhead-%")
}

// median is the median of d, which it sorts.
func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
