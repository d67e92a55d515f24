package grpcidem

import (
	"context"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/idemkit/idem/internal/rpcidem"
)

// exchange is one unary call as [server.Adapter.ServeCall] sees it: its
// Next runs the gRPC handler and writes its answer as a stored result.
type exchange struct {
	ctx     context.Context
	req     any
	method  string
	scope   func(context.Context) (string, string)
	handler grpc.UnaryHandler
	allow   map[string]bool
	stream  *heldStream

	resp any // the handler's answer, once Next ran
	err  error
}

// Route is the full method name.
func (e *exchange) Route() string { return e.method }

// Scope is the caller from the call's context.
func (e *exchange) Scope() (tenant, principal string) {
	if e.scope == nil {
		return "", ""
	}
	return e.scope(e.ctx)
}

// Next runs the handler with r's context (which carries server.Tx and
// server.LeaseFrom on a claimed call) and writes its answer to w, with
// the HTTP status of its code.
func (e *exchange) Next(w http.ResponseWriter, r *http.Request) {
	e.stream = &heldStream{method: e.method}
	ctx := grpc.NewContextWithServerTransportStream(r.Context(), e.stream)
	e.resp, e.err = e.handler(ctx, e.req)
	header, trailer := e.stream.held()
	res, err := newResult(e.resp, e.err, header, trailer, e.allow)
	rpcidem.WriteResult(w, contentType, httpStatus(status.Code(e.err)), res, err)
}
