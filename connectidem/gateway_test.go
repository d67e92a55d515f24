package connectidem_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/connectidem"
	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// The conformance run's sample API is adaptertest's, served by connect-go
// behind the interceptor (the key in the message's request_id, AIP-155;
// the caller from the Authorization header), called over the gRPC
// protocol by an HTTP gateway that idemcheck talks to. The gateway only
// translates; every decision is the interceptor's.

// buildConnect serves app behind the interceptor and returns the
// gateway. The server lives as long as the test process.
func buildConnect(app *adaptertest.App, store server.Store, cfg server.Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	icfg := connectidem.Config{
		Server: cfg,
		Scope: func(ctx context.Context) (string, string) {
			c, _ := ctx.Value(callerKey{}).([2]string)
			return c[0], c[1]
		},
		Key: func(req any) string { return req.(*structpb.Struct).GetFields()["request_id"].GetStringValue() },
	}
	h := connect.NewUnaryHandler(procedure, func(ctx context.Context, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		f := req.Msg.GetFields()
		p, err := app.Pay(ctx, f["account"].GetStringValue(), []byte(f["body"].GetStringValue()))
		switch {
		case errors.Is(err, adaptertest.ErrInvalid):
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		case errors.Is(err, adaptertest.ErrDown):
			return nil, connect.NewError(connect.CodeUnavailable, err)
		case err != nil:
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		msg, err := structpb.NewStruct(map[string]any{"payment_id": p.ID, "account_id": p.Account, "amount_cents": float64(p.AmountCents)})
		return connect.NewResponse(msg), err
	}, connect.WithInterceptors(bearer(), connectidem.NewServerInterceptor(store, icfg)))
	mux := http.NewServeMux()
	mux.Handle(procedure, h)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	return gateway(app, newClient(srv.URL, connect.WithGRPC()))
}

type callerKey struct{}

// bearer is the API's authentication: the caller from the Authorization
// header, in the context.
func bearer() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			tenant, principal, ok := adaptertest.Auth(req.Header().Get("Authorization"))
			if !ok {
				return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("no caller"))
			}
			return next(context.WithValue(ctx, callerKey{}, [2]string{tenant, principal}), req)
		}
	})
}

// gateway is the HTTP face of the service.
func gateway(app *adaptertest.App, client *connect.Client[structpb.Struct, structpb.Struct]) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/accounts/{id}/payments", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fields := map[string]any{"account": r.PathValue("id"), "body": string(body)}
		if keys := r.Header.Values(wire.HeaderKey); len(keys) == 1 {
			fields["request_id"] = keys[0]
		}
		msg, err := structpb.NewStruct(fields)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := connect.NewRequest(msg)
		req.Header().Set("Authorization", r.Header.Get("Authorization"))
		resp, err := client.CallUnary(r.Context(), req)
		if err != nil {
			writeError(w, err)
			return
		}
		if resp.Header().Get(wire.HeaderReplayed) == "true" {
			w.Header().Set(wire.HeaderReplayed, "true")
		}
		f := resp.Msg.GetFields()
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

// writeError answers with a problem document for err: the HTTP status of
// its problem (ErrorInfo) or its code, Retry-After from its RetryInfo.
func writeError(w http.ResponseWriter, err error) {
	code := connect.CodeOf(err)
	p := wire.Problem{Type: "about:blank", Title: err.Error(), Status: gatewayStatus(code)}
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			v, derr := d.Value()
			if derr != nil {
				continue
			}
			switch v := v.(type) {
			case *errdetails.ErrorInfo:
				if name := v.GetMetadata()["problem"]; name != "" {
					p.Type, p.Status = wire.DefaultProblemPrefix+name, wire.ProblemStatus(name, p.Status)
				}
			case *errdetails.RetryInfo:
				secs := int64((v.GetRetryDelay().AsDuration() + 999_999_999) / 1_000_000_000)
				p.RetryAfter = secs
				w.Header().Set(wire.HeaderRetryAfter, strconv.FormatInt(secs, 10))
			}
		}
	}
	wire.WriteProblem(w, p)
}

func gatewayStatus(c connect.Code) int {
	switch c {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
		return http.StatusUnprocessableEntity
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodeAborted:
		return http.StatusConflict
	case connect.CodeUnavailable, connect.CodeCanceled, connect.CodeDeadlineExceeded:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
