package testserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

func BenchmarkDraw(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		Draw(42, "chaos", "8e03978e-40d5-43e8-bc93-6894a57f9324", i&7)
	}
}

// benchRequests sends keyed POSTs over one keep-alive connection.
func benchRequests(b *testing.B, url string) {
	c := &http.Client{}
	for i := 0; b.Loop(); i++ {
		req, _ := http.NewRequest(http.MethodPost, url, nil)
		req.Header.Set("Idempotency-Key", "op-"+strconv.Itoa(i))
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"id":"pay-1"}`)
})

// BenchmarkBaseline is the same handler under httptest, for comparison.
func BenchmarkBaseline(b *testing.B) {
	s := httptest.NewServer(okHandler)
	defer s.Close()
	benchRequests(b, s.URL)
}

// BenchmarkPass measures a Server whose seeded rule draws for every
// request and lets it pass: the overhead of numbering, deciding and
// logging.
func BenchmarkPass(b *testing.B) {
	s := New(okHandler, Config{Rules: []Rule{{Name: "never", Mix: []Chance{{P: 0, Fault: Fault{Kind: FaultReset}}}}}})
	defer s.Close()
	benchRequests(b, s.URL)
}

// BenchmarkStatusAfter measures the buffered path: the handler runs into a
// recorder and a 503 goes out instead.
func BenchmarkStatusAfter(b *testing.B) {
	s := New(okHandler, Config{Rules: []Rule{Always(Match{}, Fault{Kind: FaultStatusAfter})}})
	defer s.Close()
	benchRequests(b, s.URL)
}
