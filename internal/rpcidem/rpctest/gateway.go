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
// Authorization, answering with the response or a Failure, and the
// answer's header metadata (the replayed marker and where the operation
// stands; as an http.Header, whatever the case of the names).
type Service func(ctx context.Context, authorization string, req *structpb.Struct) (resp *structpb.Struct, header http.Header, f *Failure)

// Gateway is the HTTP face of the service, which idemcheck talks to. It
// only translates: the key and the body into the message, the status, the
// replayed marker and where the operation stands (header metadata, and
// the ErrorInfo of a refusal) back into HTTP (docs/CONTRACT.md §11's table
// read backwards); every decision is the interceptor's.
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
		resp, header, failure := call(r.Context(), r.Header.Get("Authorization"), req)
		for _, name := range outcomeHeaders {
			if v := header.Get(name); v != "" {
				w.Header().Set(name, v)
			}
		}
		if failure != nil {
			writeFailure(w, failure)
			return
		}
		if header.Get(wire.HeaderReplayed) == "true" {
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

// outcomeHeaders are the headers that say where an operation stands.
var outcomeHeaders = []string{wire.HeaderOperationState, wire.HeaderOperationRef, wire.HeaderSafeNewKey, wire.HeaderKeyExpires}

// writeFailure answers with a problem document for f: the HTTP status of
// its problem (ErrorInfo) or its code, the problem's operation members
// from the ErrorInfo, Retry-After from its RetryInfo.
func writeFailure(w http.ResponseWriter, f *Failure) {
	p := wire.Problem{Type: "about:blank", Title: f.Message, Status: httpStatus(f.Code)}
	for _, d := range f.Details {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			md := d.GetMetadata()
			if name := md["problem"]; name != "" {
				p.Type, p.Status = wire.DefaultProblemPrefix+name, wire.ProblemStatus(name, p.Status)
			}
			p.OperationState, p.OperationRef = md[wire.InfoOperationState], md[wire.InfoOperationRef]
			if safe, ok := md[wire.InfoSafeNewKey]; ok {
				b := safe == "true"
				p.SafeNewKey = &b
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
