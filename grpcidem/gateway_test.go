package grpcidem_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/grpcidem"
	"github.com/idemkit/idem/grpcidem/internal/sample"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/internal/rpcidem/rpctest"
	"github.com/idemkit/idem/server"
)

// The conformance run's sample API is adaptertest's, served over gRPC:
// a grpc-go server with the interceptor (the key in the request message's
// request_id, AIP-155, the caller from the authorization metadata), and
// rpctest's HTTP gateway in front of it that idemcheck talks to.

// buildGRPC serves app over gRPC behind the interceptor and returns the
// gateway. The server lives as long as the test process.
func buildGRPC(app *adaptertest.App, store server.Store, cfg server.Config) http.Handler {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	icfg := grpcidem.Config{Server: cfg, Scope: rpctest.Caller, Key: rpctest.RequestID}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(bearer, grpcidem.UnaryServerInterceptor(store, icfg)))
	sample.Register(srv, sample.PayFunc(func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
		resp, code, err := rpctest.Pay(ctx, app, req)
		if err != nil {
			return nil, status.Error(codes.Code(code), err.Error())
		}
		return resp, nil
	}))
	go func() { _ = srv.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	return rpctest.Gateway(app, func(ctx context.Context, auth string, req *structpb.Struct) (*structpb.Struct, http.Header, *rpctest.Failure) {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", auth)
		var md metadata.MD
		resp, err := sample.Pay(ctx, cc, req, grpc.Header(&md))
		header := http.Header{}
		for k, vs := range md {
			for _, v := range vs {
				header.Add(k, v)
			}
		}
		if err != nil {
			st := status.Convert(err)
			return nil, header, &rpctest.Failure{Code: int(st.Code()), Message: st.Message(), Details: st.Details()}
		}
		return resp, header, nil
	})
}

// bearer is the API's authentication: the caller from the authorization
// metadata entry, in the context.
func bearer(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vs := md.Get("authorization")
	if len(vs) != 1 {
		return nil, status.Error(codes.Unauthenticated, "no caller")
	}
	tenant, principal, ok := adaptertest.Auth(vs[0])
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "no caller")
	}
	return h(rpctest.WithCaller(ctx, tenant, principal), req)
}
