package connectidem_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/connectidem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/internal/rpcidem/rpctest"
	"github.com/idemkit/idem/server"
)

// The conformance run's sample API is adaptertest's, served by connect-go
// behind the interceptor (the key in the message's request_id, AIP-155;
// the caller from the Authorization header), called over the gRPC
// protocol by rpctest's HTTP gateway, which idemcheck talks to.

// buildConnect serves app behind the interceptor and returns the
// gateway. The server lives as long as the test process.
func buildConnect(app *adaptertest.App, store server.Store, cfg server.Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	icfg := connectidem.Config{Server: cfg, Scope: rpctest.Caller, Key: rpctest.RequestID}
	h := connect.NewUnaryHandler(procedure, func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		msg, code, err := rpctest.Pay(ctx, app, req.Msg)
		if err != nil {
			return nil, connect.NewError(connect.Code(code), err)
		}
		return connect.NewResponse(msg), nil
	}, connect.WithInterceptors(bearer(), connectidem.NewServerInterceptor(store, icfg)))
	mux := http.NewServeMux()
	mux.Handle(procedure, h)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	client := newClient(srv.URL, connect.WithGRPC())
	return rpctest.Gateway(app, func(ctx context.Context, auth string, msg *structpb.Struct) (*structpb.Struct, http.Header, *rpctest.Failure) {
		req := connect.NewRequest(msg)
		req.Header().Set("Authorization", auth)
		resp, err := client.CallUnary(ctx, req)
		if err != nil {
			var ce *connect.Error
			var meta http.Header
			if errors.As(err, &ce) {
				meta = ce.Meta()
			}
			return nil, meta, failure(err)
		}
		return resp.Msg, resp.Header(), nil
	})
}

// failure is err as the gateway answers it.
func failure(err error) *rpctest.Failure {
	f := &rpctest.Failure{Code: int(connect.CodeOf(err)), Message: err.Error()}
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			if v, derr := d.Value(); derr == nil {
				f.Details = append(f.Details, v)
			}
		}
	}
	return f
}

// bearer is the API's authentication: the caller from the Authorization
// header, in the context.
func bearer() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			tenant, principal, ok := adaptertest.Auth(req.Header().Get("Authorization"))
			if !ok {
				return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("no caller"))
			}
			return next(rpctest.WithCaller(ctx, tenant, principal), req)
		}
	})
}
