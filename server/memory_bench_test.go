package server

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/fingerprint"
)

// BenchmarkMemoryClaimComplete is the least work the contract asks of a
// keyed call on the memory store, with none of the middleware around it:
// the scope hash and the fingerprint of a 32-byte body, a claim of a new
// key, and the completion that stores a 32-byte response in its stored
// form. It is the floor under BenchmarkMiddlewareCore and grpcidem's
// BenchmarkInterceptor (BENCHMARKS §17).
//
//	go test -run '^$' -bench MemoryClaimComplete -benchmem ./server/
func BenchmarkMemoryClaimComplete(b *testing.B) {
	store := NewMemoryStore()
	ctx := context.Background()
	body := make([]byte, 32)
	res := &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/x-idem-grpc-result"}}, Body: make([]byte, 32)}
	r, _ := http.NewRequest(http.MethodPost, "/payments.v1.Payments/Create", nil)
	route := "/payments.v1.Payments/Create"
	n := 0
	for b.Loop() {
		n++
		key := "bench-" + strconv.Itoa(n)
		in := fingerprint.NewRoutedInput(r, route, body, nil)
		c := &Claim{Scope: fingerprint.Scope("", "", route, key), Route: route, Key: key,
			Digest: fingerprint.Sum(in), DigestAlg: fingerprint.Alg, in: in, Mode: Transactional,
			Retention: 24 * time.Hour, Wait: time.Second}
		cr, err := store.Claim(ctx, c)
		if err != nil || cr.Verdict != VerdictClaimed {
			b.Fatalf("Claim = %v, %v, want claimed", cr.Verdict, err)
		}
		if err := cr.Attempt.Complete(ctx, res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryClaimCompleteStore is BenchmarkMemoryClaimComplete
// without the hashing: the memory store's claim and completion alone.
func BenchmarkMemoryClaimCompleteStore(b *testing.B) {
	store := NewMemoryStore()
	ctx := context.Background()
	res := &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/x-idem-grpc-result"}}, Body: make([]byte, 32)}
	digest := make([]byte, 32)
	var scope [32]byte
	n := uint64(0)
	for b.Loop() {
		n++
		for i := range 8 {
			scope[i] = byte(n >> (8 * i))
		}
		c := &Claim{Scope: scope, Route: "r", Key: "k", Digest: digest, DigestAlg: fingerprint.Alg,
			Mode: Transactional, Retention: 24 * time.Hour, Wait: time.Second}
		cr, err := store.Claim(ctx, c)
		if err != nil || cr.Verdict != VerdictClaimed {
			b.Fatalf("Claim = %v, %v, want claimed", cr.Verdict, err)
		}
		if err := cr.Attempt.Complete(ctx, res); err != nil {
			b.Fatal(err)
		}
	}
}
