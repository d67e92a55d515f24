package rpctest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/internal/adaptertest"
	"github.com/idemkit/idem/internal/wire"
)

// Failure is a call that failed, as the gateway answers it: its code,
// message and decoded details (ErrorInfo, RetryInfo, ...).
type Failure struct {
	Code    int
	Message string
	Details []any
}

// Service is the RPC behind a gateway: the call of req with the caller's
// Authorization, answering with the response and whether it was a
// replay, or with a Failure.
type Service func(ctx context.Context, authorization string, req *structpb.Struct) (resp *structpb.Struct, replayed bool, f *Failure)

// Gateway is the HTTP face of the service, which idemcheck talks to. It
// only translates: the key and the body into the message, the status and
// the replayed marker back into HTTP (docs/CONTRACT.md §11's table read
// backwards); every decision is the interceptor's.
func Gateway(app *adaptertest.App, call Service) http.Handler {
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
		resp, replayed, failure := call(r.Context(), r.Header.Get("Authorization"), req)
		if failure != nil {
			writeFailure(w, failure)
			return
		}
		if replayed {
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

// writeFailure answers with a problem document for f: the HTTP status of
// its problem (ErrorInfo) or its code, Retry-After from its RetryInfo.
func writeFailure(w http.ResponseWriter, f *Failure) {
	p := wire.Problem{Type: "about:blank", Title: f.Message, Status: httpStatus(f.Code)}
	for _, d := range f.Details {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if name := d.GetMetadata()["problem"]; name != "" {
				p.Type, p.Status = wire.DefaultProblemPrefix+name, wire.ProblemStatus(name, p.Status)
			}
		case *errdetails.RetryInfo:
			secs := int64((d.GetRetryDelay().AsDuration() + 999_999_999) / 1_000_000_000)
			p.RetryAfter = secs
			w.Header().Set(wire.HeaderRetryAfter, strconv.FormatInt(secs, 10))
		}
	}
	wire.WriteProblem(w, p)
}

// httpStatus is the HTTP status the gateway answers a code with.
func httpStatus(code int) int {
	switch code {
	case codeInvalidArgument, codeFailedPrecondition:
		return http.StatusUnprocessableEntity
	case codeUnauthenticated:
		return http.StatusUnauthorized
	case codeAborted:
		return http.StatusConflict
	case codeResourceExhausted:
		return http.StatusTooManyRequests
	case codeUnavailable, codeCanceled, codeDeadlineExceeded:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
