package idem

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
	const reply = `{"payment_id":"pay_0123456789","status":"succeeded"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, reply)
	}))
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 4}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: stack(base)}
	body := `{"account_id":"acc_1","amount_cents":1250,"currency":"EUR"}`
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := client.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
