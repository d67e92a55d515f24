package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
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
