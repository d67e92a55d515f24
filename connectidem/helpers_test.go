package connectidem_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/connectidem"
	"github.com/idemkit/idem/server"
)

// procedure is the sample service's one method: a payment whose request
// and response are google.protobuf.Struct, so that it needs no generated
// code.
const procedure = "/idem.sample.Payments/Pay"

// counter is the sample handler: it counts its runs and answers with
// answer (by default the run's number and the amount).
type counter struct {
	runs   atomic.Int64
	answer func(ctx context.Context, n int64, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error)
}

func (c *counter) pay(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
	n := c.runs.Add(1)
	if c.answer != nil {
		return c.answer(ctx, n, req)
	}
	msg, err := structpb.NewStruct(map[string]any{"payment": float64(n), "amount": req.Msg.GetFields()["amount"].GetNumberValue()})
	return connect.NewResponse(msg), err
}

// serve serves c behind the server interceptor over store with cfg, and
// outer interceptors before it, on HTTP/2 without TLS (so that every
// protocol works), until the test ends; it returns the base URL.
func serve(t *testing.T, store server.Store, cfg connectidem.Config, c *counter, outer ...connect.Interceptor) string {
	t.Helper()
	if cfg.Server.Logger == nil {
		cfg.Server.Logger = slog.New(slog.DiscardHandler)
	}
	ics := append(outer, connectidem.NewServerInterceptor(store, cfg))
	mux := http.NewServeMux()
	mux.Handle(procedure, connect.NewUnaryHandler(procedure, c.pay, connect.WithInterceptors(ics...)))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// h2c is an HTTP client that speaks HTTP/2 without TLS.
func h2c() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// protocols are the client options of each protocol.
var protocols = []struct {
	name string
	opts []connect.ClientOption
}{{"connect", nil}, {"grpc", []connect.ClientOption{connect.WithGRPC()}}, {"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}}}

// newClient is a client of the sample service at url.
func newClient(url string, opts ...connect.ClientOption) *connect.Client[structpb.Struct, structpb.Struct] {
	return connect.NewClient[structpb.Struct, structpb.Struct](h2c(), url+procedure, opts...)
}

// payment is a request to pay amount with key ("" for none).
func payment(t *testing.T, amount float64, key string) *connect.Request[structpb.Struct] {
	t.Helper()
	msg, err := structpb.NewStruct(map[string]any{"amount": amount})
	require.NoError(t, err)
	req := connect.NewRequest(msg)
	if key != "" {
		req.Header().Set("Idempotency-Key", key)
	}
	return req
}
