package grpcidem

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/grpcidem/internal/sample"
	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/server"
)

// BenchmarkContractFloor is the least work the contract asks of one keyed
// unary call on the memory store, done directly with none of the adapter
// (no http.Request, no capture, no Recorder, no refusal or outcome
// headers): the request's deterministic encoding, its fingerprint and
// scope hash, a claim of a new key, the answer encoded as a stored result
// and the completion that stores it. Each part runs alone too, on the
// request and answer of BenchmarkInterceptor, so that the floor under its
// cost (BENCHMARKS §17) can be read part by part:
//
//	go test -run '^$' -bench ContractFloor -benchmem ./
func BenchmarkContractFloor(b *testing.B) {
	req, _ := structpb.NewStruct(map[string]any{"call": "c1", "amount_cents": 1250.0})
	resp, _ := structpb.NewStruct(map[string]any{"payment_id": 1.0})
	body, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	r, _ := http.NewRequest(http.MethodPost, sample.Method, nil)
	b.Run("request-encoding", func(b *testing.B) {
		for b.Loop() {
			if _, err := (proto.MarshalOptions{Deterministic: true}).Marshal(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fingerprint", func(b *testing.B) {
		for b.Loop() {
			_ = fingerprint.Sum(fingerprint.NewRoutedInput(r, sample.Method, body, nil))
			_ = fingerprint.Scope("", "", sample.Method, "4f5d2c1e-9a7b-4c3d-8e2f-1a2b3c4d5e6f")
		}
	})
	b.Run("result-encoding", func(b *testing.B) {
		for b.Loop() {
			res, err := newResult(resp, nil, nil, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			_ = res.Encode()
		}
	})
	b.Run("claim-complete", func(b *testing.B) {
		floorStore(b)
	})
	b.Run("all", func(b *testing.B) {
		store := server.NewMemoryStore()
		ctx := context.Background()
		n := 0
		for b.Loop() {
			n++
			key := "floor-" + strconv.Itoa(n)
			body, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
			if err != nil {
				b.Fatal(err)
			}
			c := &server.Claim{Scope: fingerprint.Scope("", "", sample.Method, key), Route: sample.Method, Key: key,
				Digest: fingerprint.Sum(fingerprint.NewRoutedInput(r, sample.Method, body, nil)), DigestAlg: fingerprint.Alg,
				Mode: server.Transactional, Retention: 24 * time.Hour, Wait: 5 * time.Second}
			cr, err := store.Claim(ctx, c)
			if err != nil || cr.Verdict != server.VerdictClaimed {
				b.Fatalf("Claim = %v, %v, want claimed", cr.Verdict, err)
			}
			res, err := newResult(resp, nil, nil, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			stored := &server.Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {contentType}}, Body: res.Encode()}
			if err := cr.Attempt.Complete(ctx, stored); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// scopeOf is a scope of its own for each n.
func scopeOf(n int) (s [32]byte) {
	copy(s[:], strconv.Itoa(n))
	return s
}

// floorStore claims and completes a new scope per iteration on a memory
// store, with a stored result of the size of BenchmarkInterceptor's.
func floorStore(b *testing.B) {
	store := server.NewMemoryStore()
	ctx := context.Background()
	stored := &server.Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {contentType}}, Body: make([]byte, 64)}
	digest := make([]byte, 32)
	n := 0
	for b.Loop() {
		n++
		c := &server.Claim{Scope: scopeOf(n), Route: sample.Method, Key: "k", Digest: digest, DigestAlg: fingerprint.Alg,
			Mode: server.Transactional, Retention: 24 * time.Hour, Wait: 5 * time.Second}
		cr, err := store.Claim(ctx, c)
		if err != nil || cr.Verdict != server.VerdictClaimed {
			b.Fatalf("Claim = %v, %v, want claimed", cr.Verdict, err)
		}
		if err := cr.Attempt.Complete(ctx, stored); err != nil {
			b.Fatal(err)
		}
	}
}
