package connectidem

import (
	"bytes"
	"context"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/idemkit/idem/internal/wire"
)

// exchange is one unary call as [server.Adapter] sees it: its Next runs
// the rest of the chain and writes its answer as a stored result.
type exchange struct {
	ctx       context.Context
	req       connect.AnyRequest
	procedure string
	scope     func(context.Context) (string, string)
	next      connect.UnaryFunc
	allow     map[string]bool

	ran  bool
	resp connect.AnyResponse
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
	e.ran = true
	code := wire.RPCStatus(int(connect.CodeOf(e.err)))
	if e.err == nil {
		code = wire.RPCStatus(0)
	}
	res, err := newResult(e.resp, e.err, e.allow)
	var body []byte
	if err != nil {
		code = http.StatusInternalServerError // never stored: the answer cannot be encoded
	} else {
		body = res.encode()
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// recorder is the http.ResponseWriter the adapter answers to.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *recorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}
