package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/internal/conformance"
	"github.com/idemkit/idem/server"
)

// stormBody is in the body of the outcome check's concurrent operation
// when it runs alone (-checks outcome): baseline's body is the first
// rendered, then the check's first request, another body, the malformed
// key's, and the storm's, the fifth.
const stormBody = `"reference": "idemcheck-5-`

// TestOutcomeCheckOnIdemsOwn409: idem's middleware passes the outcome
// check with the 409 of its concurrent duplicates seen: the storm's first
// attempt holds its key until every duplicate has had its 409, so the
// check meets idem's in-flight answer (Leased: a duplicate never waits).
func TestOutcomeCheckOnIdemsOwn409(t *testing.T) {
	const concurrency = 4
	var mu sync.Mutex
	conflicts := 0
	all := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), stormBody) {
			select {
			case <-all:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"payment_id":"pay_1"}`))
	})
	mw := server.Middleware(server.NewMemoryStore(), server.Config{Mode: server.Leased, Logger: slog.New(slog.DiscardHandler)})(h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		mw.ServeHTTP(rec, r)
		if rec.Code == http.StatusConflict {
			mu.Lock()
			if conflicts++; conflicts == concurrency-1 {
				close(all)
			}
			mu.Unlock()
		}
		for name, values := range rec.Header() {
			w.Header()[name] = values
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)

	code, doc := idemcheckJSON(t, "-url", srv.URL, "-body", paymentBody, "-checks", "outcome",
		"-concurrency", "4", "-seed", "1", "-timeout", "30s")
	c, _ := findCheck(doc, "outcome")
	assert.Equal(t, conformance.Pass, c.Verdict, "checks:\n%s", pretty(doc))
	assert.Contains(t, c.Detail, "3 concurrent duplicates' 409 said in-flight, not safe, same reference")
	assert.Equal(t, exitPass, code)
}
