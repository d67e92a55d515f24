package server

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/idemkit/idem/internal/wire"
)

// The middleware answers a refusal in the protocol of the request
// (docs/CONTRACT.md §11): a problem document over plain HTTP, a Connect
// error to a Connect unary request, and a gRPC status to a gRPC or
// gRPC-Web request, which it refuses whole: those protocols put the status
// in trailers and frame (and may compress) the messages, so the fingerprint
// of the body and the stored response would not be the call's. Their place
// is the grpcidem interceptor.

// grpcProtocol reports a gRPC or gRPC-Web request.
func grpcProtocol(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

// connectUnary reports a unary request of the Connect protocol, which
// carries its protocol version (a GET one is never keyed).
func connectUnary(r *http.Request) bool {
	return r.Header.Get("Connect-Protocol-Version") != ""
}

func protocolUnsupported() problem {
	return problem{status: http.StatusUnsupportedMediaType, name: wire.ProblemProtocolUnsupported, title: "Protocol unsupported",
		detail: "idem's HTTP middleware cannot protect a gRPC or gRPC-Web call (its status is in trailers, its messages framed); " +
			"install grpcidem's interceptor on the service, or call it with the Connect protocol"}
}

// answerRefusal is the one way every refusal leaves the middleware, before
// the handler (refuse) or after it (a commit that failed, a stale
// completion): handed to ex when it is an [answerer], else written in the
// protocol of r.
func (s *settings) answerRefusal(w http.ResponseWriter, r *http.Request, ex Exchange, p problem) {
	if !p.handTo(ex) {
		s.writeRefusal(w, r, p)
	}
}

// writeRefusal writes p in the protocol of r.
func (s *settings) writeRefusal(w http.ResponseWriter, r *http.Request, p problem) {
	switch {
	case grpcProtocol(r):
		p.st.write(w.Header())
		writeGRPCStatus(w, r, p)
	case connectUnary(r):
		p.st.write(w.Header())
		writeConnectError(w, p)
	default:
		s.writeProblem(w, p)
	}
}

// writeGRPCStatus answers with a trailers-only gRPC response.
func writeGRPCStatus(w http.ResponseWriter, r *http.Request, p problem) {
	code := wire.RefusalCode(p.name, p.status)
	msg := p.title + ": " + p.detail
	h := w.Header()
	ct := "application/grpc"
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc-web") {
		ct = "application/grpc-web"
	}
	h.Set("Content-Type", ct)
	h.Set("Grpc-Status", strconv.Itoa(code.Number))
	h.Set("Grpc-Message", url.PathEscape(msg))
	st := wire.StatusProto(code.Number, msg, wire.RefusalDetails(p.name, p.retryAfter, p.st.info()))
	h.Set("Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(st))
	w.WriteHeader(http.StatusOK)
}

// connectError is the Connect protocol's error body.
type connectError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details []connectDetail `json:"details,omitempty"`
}

type connectDetail struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// writeConnectError answers with a Connect unary error: the code's HTTP
// status, a JSON body with the code, the message and the details.
func writeConnectError(w http.ResponseWriter, p problem) {
	code := wire.RefusalCode(p.name, p.status)
	body := connectError{Code: code.Connect, Message: p.title + ": " + p.detail}
	for _, d := range wire.RefusalDetails(p.name, p.retryAfter, p.st.info()) {
		body.Details = append(body.Details, connectDetail{Type: d.Type, Value: base64.RawStdEncoding.EncodeToString(d.Value)})
	}
	b, _ := json.Marshal(body)
	if p.retryAfter > 0 {
		w.Header().Set(wire.HeaderRetryAfter, strconv.FormatInt(p.retryAfter, 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(wire.ConnectStatus(code))
	_, _ = w.Write(b)
}
