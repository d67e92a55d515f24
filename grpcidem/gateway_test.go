package grpcidem_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/grpcidem"
	"github.com/idemkit/idem/grpcidem/internal/sample"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// The conformance run's sample API is adaptertest's, served over gRPC:
// a grpc-go server with the interceptor (the key in the request message's
// request_id, AIP-155, the caller from the authorization metadata), and an
// HTTP gateway in front of it that idemcheck talks to. The gateway only
// translates: the key and the body into the message, the status and the
// replayed marker back into HTTP (docs/CONTRACT.md §11's table read
// backwards); every decision is the interceptor's.

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
	icfg := grpcidem.Config{
		Server: cfg,
		Scope: func(ctx context.Context) (string, string) {
			c, _ := ctx.Value(callerKey{}).([2]string)
			return c[0], c[1]
		},
		Key: func(req any) string { return req.(*structpb.Struct).GetFields()["request_id"].GetStringValue() },
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(bearer, grpcidem.UnaryServerInterceptor(store, icfg)))
	sample.Register(srv, sample.PayFunc(func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
		f := req.GetFields()
		p, err := app.Pay(ctx, f["account"].GetStringValue(), []byte(f["body"].GetStringValue()))
		switch {
		case errors.Is(err, adaptertest.ErrInvalid):
			return nil, status.Error(codes.InvalidArgument, err.Error())
		case errors.Is(err, adaptertest.ErrDown):
			return nil, status.Error(codes.Unavailable, err.Error())
		case err != nil:
			return nil, status.Error(codes.Internal, err.Error())
		}
		return structpb.NewStruct(map[string]any{"payment_id": p.ID, "account_id": p.Account, "amount_cents": float64(p.AmountCents)})
	}))
	go func() { _ = srv.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	return gateway(app, cc)
}

type callerKey struct{}

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
	return h(context.WithValue(ctx, callerKey{}, [2]string{tenant, principal}), req)
}

// gateway is the HTTP face of the gRPC service.
func gateway(app *adaptertest.App, cc *grpc.ClientConn) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/accounts/{id}/payments", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fields := map[string]any{"account": r.PathValue("id"), "body": string(body)}
		if keys := r.Header.Values(wire.HeaderKey); len(keys) == 1 {
			fields["request_id"] = keys[0]
		}
		req, err := structpb.NewStruct(fields)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx := metadata.AppendToOutgoingContext(r.Context(), "authorization", r.Header.Get("Authorization"))
		var header metadata.MD
		resp, err := sample.Pay(ctx, cc, req, grpc.Header(&header))
		if err != nil {
			writeStatus(w, status.Convert(err))
			return
		}
		if len(header.Get(grpcidem.MetadataReplayed)) > 0 {
			w.Header().Set(wire.HeaderReplayed, "true")
		}
		f := resp.GetFields()
		writeJSON(w, http.StatusCreated, adaptertest.Payment{ID: f["payment_id"].GetStringValue(),
			Account: f["account_id"].GetStringValue(), AmountCents: int64(f["amount_cents"].GetNumberValue())})
	})
	mux.HandleFunc("GET /v1/accounts/{id}", func(w http.ResponseWriter, r *http.Request) {
		n, err := app.Count(r.Context(), r.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"payment_count": n})
	})
	mux.HandleFunc("GET /v1/payments/{id}", func(w http.ResponseWriter, r *http.Request) {
		ok, err := app.Exists(r.Context(), r.PathValue("id"))
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case !ok:
			http.NotFound(w, r)
		default:
			writeJSON(w, http.StatusOK, map[string]string{"payment_id": r.PathValue("id")})
		}
	})
	return mux
}

// writeStatus answers with a problem document for st: the HTTP status of
// its problem (ErrorInfo) or its code, Retry-After from its RetryInfo.
func writeStatus(w http.ResponseWriter, st *status.Status) {
	p := wire.Problem{Type: "about:blank", Title: st.Message(), Status: httpOf(st.Code())}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if name := d.GetMetadata()["problem"]; name != "" {
				p.Type = wire.DefaultProblemPrefix + name
				p.Status = problemStatus(name, p.Status)
			}
		case *errdetails.RetryInfo:
			secs := int64((d.GetRetryDelay().AsDuration() + 999_999_999) / 1_000_000_000)
			p.RetryAfter = secs
			w.Header().Set(wire.HeaderRetryAfter, strconv.FormatInt(secs, 10))
		}
	}
	wire.WriteProblem(w, p)
}

// problemStatus is the HTTP status of the contract's problem name.
func problemStatus(name string, def int) int {
	switch name {
	case wire.ProblemKeyMissing, wire.ProblemKeyInvalid:
		return http.StatusBadRequest
	case wire.ProblemKeyReused:
		return http.StatusUnprocessableEntity
	case wire.ProblemKeyInFlight:
		return http.StatusConflict
	}
	return def
}

func httpOf(c codes.Code) int {
	switch c {
	case codes.InvalidArgument:
		return http.StatusUnprocessableEntity
	case codes.FailedPrecondition:
		return http.StatusUnprocessableEntity
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.Aborted:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
