package grpcidem_test

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/grpcidem"
	"github.com/idemkit/idem/grpcidem/internal/sample"
	"github.com/idemkit/idem/server"
)

// serve serves the sample service p behind the interceptor over store
// with cfg (and an authentication interceptor before it that puts the
// "tenant" metadata entry in the context) on a loopback port until the
// test ends, and returns a connection to it.
func serve(t *testing.T, store server.Store, cfg grpcidem.Config, p sample.Payer) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if cfg.Scope == nil {
		cfg.Scope = func(ctx context.Context) (string, string) { return tenantOf(ctx), "" }
	}
	if cfg.Server.Logger == nil {
		cfg.Server.Logger = slog.New(slog.DiscardHandler)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, grpcidem.UnaryServerInterceptor(store, cfg)))
	sample.Register(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

type tenantKey struct{}

// auth is the application's authentication: the caller is the "tenant"
// metadata entry.
func auth(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if vs := md.Get("tenant"); len(vs) == 1 {
		ctx = context.WithValue(ctx, tenantKey{}, vs[0])
	}
	return h(ctx, req)
}

func tenantOf(ctx context.Context) string {
	s, _ := ctx.Value(tenantKey{}).(string)
	return s
}

// counter is a Payer that counts its runs and answers with answer.
type counter struct {
	runs   atomic.Int64
	answer func(ctx context.Context, n int64, req *structpb.Struct) (*structpb.Struct, error)
}

func (c *counter) Pay(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
	n := c.runs.Add(1)
	if c.answer != nil {
		return c.answer(ctx, n, req)
	}
	return structpb.NewStruct(map[string]any{"payment": float64(n), "amount": req.Fields["amount"].GetNumberValue()})
}

// payment is a request to pay amount.
func payment(t *testing.T, amount float64) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(map[string]any{"amount": amount})
	require.NoError(t, err)
	return s
}

// keyed is ctx with the key and the tenant in the outgoing metadata.
func keyed(ctx context.Context, key, tenant string) context.Context {
	md := metadata.Pairs("tenant", tenant)
	if key != "" {
		md.Append(grpcidem.MetadataKey, key)
	}
	return metadata.NewOutgoingContext(ctx, md)
}
