package connectidem

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"github.com/idemkit/idem/internal/rpcidem"
	"github.com/idemkit/idem/internal/wire"
)

// exchange is one unary call as [server.Adapter.ServeCall] sees it: its
// Next runs the rest of the chain and writes its answer as a stored
// result.
type exchange struct {
	ctx       context.Context
	req       connect.AnyRequest
	procedure string
	scope     func(context.Context) (string, string)
	next      connect.UnaryFunc
	allow     map[string]bool

	resp connect.AnyResponse // the rest of the chain's answer, once Next ran
	err  error
}

// Route is the procedure.
func (e *exchange) Route() string { return e.procedure }

// Scope is the caller from the call's context.
func (e *exchange) Scope() (tenant, principal string) {
	if e.scope == nil {
		return "", ""
	}
	return e.scope(e.ctx)
}

// Next runs the rest of the chain with r's context (which carries
// server.Tx and server.LeaseFrom on a claimed call) and writes its answer
// to w, with the HTTP status of its code.
func (e *exchange) Next(w http.ResponseWriter, r *http.Request) {
	e.resp, e.err = e.next(r.Context(), e.req)
	code := wire.RPCStatus(int(connect.CodeOf(e.err)))
	if e.err == nil {
		code = wire.RPCStatus(0)
	}
	res, err := newResult(e.resp, e.err, e.allow)
	rpcidem.WriteResult(w, contentType, code, res, err)
}
