package connectidem

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemkit/idem/internal/rpcidem"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// NewServerInterceptor returns a handler interceptor that runs each keyed
// unary call at most once per key and scope and answers every retry with
// the stored result (see the package doc and docs/CONTRACT.md §11). store
// nil means a new [server.MemoryStore]. On a client, and for a request
// that is not a proto.Message, it passes through. The call's context
// governs the claim; the commit of a handler that finished runs even if
// the client has gone. It panics where [server.NewAdapter] does, and on a
// Config.Server with a KeyHeader. It is safe for concurrent use.
func NewServerInterceptor(store server.Store, cfg Config) connect.Interceptor {
	if cfg.Server.KeyHeader != "" {
		panic("connectidem: Config.Server.KeyHeader must be empty: the key is the Idempotency-Key header or Config.Key's")
	}
	i := &interceptor{a: server.NewAdapter(store, cfg.Server), cfg: cfg, allow: allowSet(cfg.Headers)}
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			msg, ok := req.Any().(proto.Message)
			if req.Spec().IsClient || !ok {
				return next(ctx, req)
			}
			return i.intercept(ctx, req, msg, next)
		}
	})
}

type interceptor struct {
	a     *server.Adapter
	cfg   Config
	allow map[string]bool
}

func (i *interceptor) intercept(ctx context.Context, req connect.AnyRequest, msg proto.Message, next connect.UnaryFunc) (connect.AnyResponse, error) {
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	ex := &exchange{ctx: ctx, req: req, procedure: req.Spec().Procedure, scope: i.cfg.Scope, next: next, allow: i.allow}
	return i.answer(i.a.ServeCall(ctx, i.headers(req), body, ex), ex)
}

// headers is the key and the fingerprinted request headers.
func (i *interceptor) headers(req connect.AnyRequest) http.Header {
	var keyOf func() string
	if i.cfg.Key != nil {
		keyOf = func() string { return i.cfg.Key(req.Any()) }
	}
	return rpcidem.CallHeader(keyOf, req.Header().Values, i.cfg.Server.FingerprintHeaders)
}

// answer turns what the core made of the call into its answer: a
// refusal, a replay, or the rest of the chain's own answer; each with
// where its operation stands.
func (i *interceptor) answer(ans server.CallAnswer, ex *exchange) (connect.AnyResponse, error) {
	if ans.Refusal != nil {
		ce := refusal(*ans.Refusal)
		setOutcome(ce.Meta(), ans.Outcome)
		return nil, ce
	}
	if ans.Replay != nil {
		res, err := rpcidem.Decode(ans.Replay.Body)
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, errCorrupt)
		}
		resp, err := storedAnswer(res)
		if h := answerHeader(resp, err); h != nil {
			h.Set(wire.HeaderReplayed, "true")
			setOutcome(h, ans.Outcome)
		}
		return resp, err
	}
	if !ans.Ran {
		return nil, connect.NewError(connect.CodeInternal, errors.New("connectidem: the adapter answered neither with the handler nor with a refusal"))
	}
	err := ex.err
	var ce *connect.Error
	if err != nil && !errors.As(err, &ce) {
		err = connect.NewError(connect.CodeUnknown, err) // as connect sends it
	}
	setOutcome(answerHeader(ex.resp, err), ans.Outcome)
	return ex.resp, err
}

// answerHeader is the header of an answer: the response's, or the error's
// metadata; nil for neither.
func answerHeader(resp connect.AnyResponse, err error) http.Header {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce.Meta()
	case err == nil && resp != nil:
		return resp.Header()
	}
	return nil
}

// setOutcome sets where the operation stands on h (docs/CONTRACT.md §11),
// when h is not nil and o says something.
func setOutcome(h http.Header, o server.Outcome) {
	if h == nil {
		return
	}
	for name, v := range rpcidem.OutcomeEntries(o) {
		h.Set(name, v)
	}
}

// refusal is the *connect.Error of a refusal of the core, with an
// ErrorInfo and, when the refusal says to wait, a RetryInfo and
// Retry-After.
func refusal(r server.Refusal) *connect.Error {
	msg := r.Title
	if r.Detail != "" {
		msg += ": " + r.Detail
	}
	ce := connect.NewError(connect.Code(wire.RefusalCode(r.Problem, r.Status).Number), errors.New(msg))
	if ed, err := connect.NewErrorDetail(rpcidem.ErrorInfo(r)); err == nil {
		ce.AddDetail(ed)
	}
	if r.RetryAfter > 0 {
		if ed, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.RetryAfter)}); err == nil {
			ce.AddDetail(ed)
		}
		ce.Meta().Set(wire.HeaderRetryAfter, strconv.FormatInt(int64(r.RetryAfter/time.Second), 10))
	}
	return ce
}
