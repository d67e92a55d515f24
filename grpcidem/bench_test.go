package grpcidem_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/grpcidem"
	"github.com/idemkit/idem/grpcidem/internal/sample"
	"github.com/idemkit/idem/server"
)

// BenchmarkInterceptor is the server interceptor alone on the memory
// store, called directly (no network): a fresh key per call.
//
//	go test -run '^$' -bench Interceptor -benchmem ./
func BenchmarkInterceptor(b *testing.B) {
	ic := grpcidem.UnaryServerInterceptor(server.NewMemoryStore(), grpcidem.Config{Server: server.Config{Logger: slog.New(slog.DiscardHandler)}})
	req, _ := structpb.NewStruct(map[string]any{"call": "c1", "amount_cents": 1250.0})
	resp, _ := structpb.NewStruct(map[string]any{"payment_id": 1.0})
	h := func(ctx context.Context, req any) (any, error) { return resp, nil }
	info := &grpc.UnaryServerInfo{FullMethod: sample.Method}
	for b.Loop() {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(grpcidem.MetadataKey, uuid.NewString()))
		if _, err := ic(ctx, req, info, h); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMiddlewareCore is the HTTP middleware the interceptor adapts,
// alone on the memory store with a body of the same size, called
// directly: the bound of the interceptor's cost.
func BenchmarkMiddlewareCore(b *testing.B) {
	mw := server.Middleware(server.NewMemoryStore(), server.Config{Logger: slog.New(slog.DiscardHandler),
		Route: func(*http.Request) string { return sample.Method }})
	req, _ := structpb.NewStruct(map[string]any{"call": "c1", "amount_cents": 1250.0})
	body, _ := proto.Marshal(req)
	out, _ := proto.Marshal(req)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(out) }))
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, sample.Method, bytes.NewReader(body))
		r.Header.Set("Idempotency-Key", uuid.NewString())
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
}
