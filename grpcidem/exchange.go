package grpcidem

import (
	"context"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/idemkit/idem/internal/rpcidem"
	"github.com/idemkit/idem/server"
)

// exchange is one unary call as [server.Adapter] sees it: its Next runs
// the gRPC handler and writes its answer as a stored result.
type exchange struct {
	ctx     context.Context
	req     any
	method  string
	scope   func(context.Context) (string, string)
	handler grpc.UnaryHandler
	allow   map[string]bool
	stream  *heldStream

	refused  *server.Refusal  // the core refused the call (Answerer)
	replayed *server.Response // the core replays a stored result (Answerer)
	outcome  server.Outcome   // where the operation stands after a replay or a run (Answerer)

	ran  bool // the handler ran
	resp any
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
	e.ran = true
	header, trailer := e.stream.held()
	res, err := newResult(e.resp, e.err, header, trailer, e.allow)
	rpcidem.WriteResult(w, contentType, httpStatus(status.Code(e.err)), res, err)
}

// Refuse keeps the core's refusal, which answer turns into the call's
// error ([server.Answerer]).
func (e *exchange) Refuse(r server.Refusal) { e.refused = &r }

// Replay keeps the stored result the core replays and where its operation
// stands ([server.Answerer]).
func (e *exchange) Replay(res *server.Response, o server.Outcome) { e.replayed, e.outcome = res, o }

// Settled keeps where the operation stands once the handler's answer was
// settled ([server.Answerer]).
func (e *exchange) Settled(o server.Outcome) { e.outcome = o }
