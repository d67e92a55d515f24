package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a log sink that tests read while handlers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// chiServer mounts the test payments handler behind chi, on a route with a
// path parameter, with the middleware configured by cfg.
func chiServer(t *testing.T, k *kit, cfg Config) (*payments, *syncBuffer, http.Handler) {
	t.Helper()
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	p := &payments{k: k}
	r := chi.NewRouter()
	r.With(Middleware(k.store, cfg)).Post("/v1/accounts/{id}/payments", p.ServeHTTP)
	return p, logs, r
}

// chiRoute is the one line chi needs (Config.Route's doc).
func chiRoute(r *http.Request) string {
	return r.Method + " " + chi.RouteContext(r.Context()).RoutePattern()
}

// chi (v5.2 and later) sets r.Pattern and the path values itself, so the
// default Route works behind it; the one line of Config.Route's doc gives
// the same routes on older chi.
func TestBehindChi(t *testing.T) {
	for name, route := range map[string]func(*http.Request) string{"default": nil, "chi's RoutePattern": chiRoute} {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, k *kit) {
				p, logs, h := chiServer(t, k, Config{Route: route})
				srv := serve(t, muxOf(h))
				first := post(t, srv, "/v1/accounts/1/payments", "k-chi", `{"amount": 5}`)
				require.Equal(t, http.StatusCreated, first.status, first.body)
				again := post(t, srv, "/v1/accounts/1/payments", "k-chi", `{"amount": 5}`)
				assert.True(t, again.replayed())
				other := post(t, srv, "/v1/accounts/2/payments", "k-chi", `{"amount": 5}`)
				assert.Equal(t, http.StatusUnprocessableEntity, other.status,
					"one route, so the same key on another account is another request: %s", other.body)
				assert.EqualValues(t, 1, p.runs.Load())
				assert.Contains(t, logs.String(), `route="POST /v1/accounts/{id}/payments"`)
				assert.NotContains(t, logs.String(), "no route pattern")
			})
		})
	}
}

// prefixRouter routes by path prefix and sets no pattern, as routers other
// than Go's ServeMux and chi do (gorilla/mux, echo, gin).
type prefixRouter struct {
	prefix string
	h      http.Handler
}

func (p prefixRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, p.prefix) {
		http.NotFound(w, r)
		return
	}
	r.Pattern = "" // what the test's ServeMux set is not this router's
	p.h.ServeHTTP(w, r)
}

func TestWithoutPatternLogsOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		logs := &syncBuffer{}
		p := &payments{k: k}
		mw := Middleware(k.store, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		srv := serve(t, muxOf(prefixRouter{prefix: "/v1/accounts/", h: mw(p)}))
		for _, acct := range []string{"1", "2", "3"} {
			r := post(t, srv, "/v1/accounts/"+acct+"/payments", "k-raw", `{"amount": 5}`)
			assert.Equal(t, http.StatusCreated, r.status, "each raw path is a route of its own: %s", r.body)
		}
		assert.EqualValues(t, 3, p.runs.Load())
		assert.Equal(t, 1, strings.Count(logs.String(), "no route pattern"), "logged once:\n%s", logs)
		assert.Contains(t, logs.String(), "level=WARN")
	})
}

// muxOf serves h for every path.
func muxOf(h http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	return mux
}
