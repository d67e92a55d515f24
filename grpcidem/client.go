package grpcidem

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/rpcidem"
)

// UnaryClientInterceptor returns an interceptor that sends each unary call
// through idem's client (an [idem.Transport] made from cfg, whose Base
// must be nil): one key per logical call (a new UUID, or the one of
// [idem.WithKey]), sent as the idempotency-key metadata entry on every
// attempt; retries of what is safe with full jitter inside the call's
// deadline, the retry budget and a breaker per target, with the same
// options ([idem.WithMaxAttempts], [idem.WithoutKey], ...), errors and
// [idem.Observer] events as the HTTP client.
//
// A call waits for its target as gRPC's wait-for-ready does, by default:
// while the ClientConn is not READY (its dials refused or failing:
// TRANSIENT_FAILURE), an attempt waits, sending nothing, spending no
// attempt, retry token nor breaker failure, while grpc-go reconnects; it
// is sent once the connection is ready. The wait ends at the call's
// deadline (the call fails with DEADLINE_EXCEEDED, unsent) and, in all,
// after cfg.MaxWait (zero: 30 s, as for the waits of the breaker and the
// budget), past which the call goes on fail-fast, so that a call without
// a deadline does not wait for a dead target forever (cfg.AttemptTimeout,
// when set, bounds each attempt's wait as it bounds the attempt). A call whose
// options (its own, or the ClientConn's defaults) say
// grpc.WaitForReady(false), or whose method's service config says
// waitForReady false, or any call when cfg.FailFast is set, fails fast
// instead: grpc-go fails an attempt at once with UNAVAILABLE, which idem
// retries as any UNAVAILABLE answer, within MaxAttempts; one whose options
// say grpc.WaitForReady(true) waits as grpc-go then makes it wait, past
// MaxWait, until its deadline. Wait-for-ready is
// the default because a keyed call that was not sent is always safe to
// delay, and a target's restart should cost its callers latency, not
// failures. Each attempt is seen as an
// HTTP POST to grpc://target/pkg.Service/Method whose status is the
// code's (docs/CONTRACT.md §11); a RetryInfo or a grpc-retry-pushback-ms
// trailer is its Retry-After, rounded up to whole seconds. A call that
// ends on an answer returns that answer's status; one that ends on a local
// decision (budget, breaker, deadline) returns an error that unwraps to
// the [*idem.Error] and whose GRPCStatus is UNAVAILABLE, or
// DEADLINE_EXCEEDED and CANCELED for the context's errors. It panics when
// cfg.Base is set. Hedging ([idem.WithHedging]) must not be used with it.
// The interceptor is safe for concurrent use.
func UnaryClientInterceptor(cfg idem.Config) grpc.UnaryClientInterceptor {
	t := rpcidem.NewTransport(cfg, attempts{}, "grpcidem: UnaryClientInterceptor's idem.Config.Base must be nil: each attempt is the gRPC call")
	bound := rpcidem.ReadyWait(cfg)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		out, ok := reply.(proto.Message)
		if !ok {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		c := &call{method: method, req: req, reply: out, cc: cc, invoker: invoker, opts: opts, wfr: waitForReady(opts)}
		c.waited.Bound = bound
		u := &url.URL{Scheme: "grpc", Host: targetHost(cc.Target()), Path: method}
		r, err := http.NewRequestWithContext(rpcidem.WithCall(ctx, c), http.MethodPost, u.String(), nil)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		resp, err := t.RoundTrip(r)
		if err != nil {
			return &Error{err: err}
		}
		_ = resp.Body.Close()
		a, ok := c.answers.Get(resp)
		if !ok {
			return status.Errorf(codes.Internal, "grpcidem: the client returned an answer it was not given (status %d)", resp.StatusCode)
		}
		if a.st.Code() == codes.OK {
			proto.Reset(out)
			proto.Merge(out, a.reply)
		}
		return a.st.Err()
	}
}

// Error is a call that ended on a local decision of idem's client: the
// retry budget or the breaker refused it, or its deadline could not
// cover the next attempt. It unwraps to the [*idem.Error], and its
// GRPCStatus is UNAVAILABLE (DEADLINE_EXCEEDED or CANCELED when the
// context ended).
type Error struct{ err error }

// Error is the [*idem.Error]'s message.
func (e *Error) Error() string { return e.err.Error() }

// Unwrap returns the [*idem.Error].
func (e *Error) Unwrap() error { return e.err }

// GRPCStatus is the error's status.
func (e *Error) GRPCStatus() *status.Status {
	return status.New(codes.Code(rpcidem.LocalCode(e.err)), e.err.Error())
}

// targetHost names a target for the breaker: the dial target without its
// resolver scheme ("dns:///pay.example:443" is pay.example:443).
func targetHost(target string) string {
	if i := strings.LastIndex(target, "/"); i >= 0 {
		target = target[i+1:]
	}
	return target
}

// call is one logical call: what every attempt sends, and the answer of
// each attempt by the response that stands for it.
type call struct {
	method  string
	req     any
	reply   proto.Message
	cc      *grpc.ClientConn
	invoker grpc.UnaryInvoker
	opts    []grpc.CallOption
	answers rpcidem.Answers[answer]
	waited  rpcidem.Waited // for the target to be ready; a zero Bound: fail-fast
	wfr     *bool          // what the call options say of wait-for-ready; nil: nothing
}

// answer is one attempt's answer.
type answer struct {
	reply proto.Message
	st    *status.Status
}

// attempts is the Base of the interceptor's transport: each round trip is
// one attempt of the call in the request's context.
type attempts struct{}

// RoundTrip makes one attempt, once the call's target is ready (or the
// call may wait no longer), with the request's key in the metadata, and
// answers with a response whose status is the code's.
func (attempts) RoundTrip(r *http.Request) (*http.Response, error) {
	c, ok := rpcidem.CallFrom[*call](r.Context())
	if !ok {
		return nil, errors.New("grpcidem: a request that is no gRPC call reached the interceptor's transport")
	}
	ctx := r.Context()
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	if key := r.Header.Get(idem.KeyHeader); key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, MetadataKey, key)
	}
	reply := c.reply.ProtoReflect().New().Interface()
	var header, trailer metadata.MD
	err := c.invoker(ctx, c.method, c.req, reply, c.cc, append(c.opts[:len(c.opts):len(c.opts)], grpc.Header(&header), grpc.Trailer(&trailer))...)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	st := status.Convert(err)
	resp := response(r, st, trailer)
	rpcidem.CopyOutcome(resp.Header, header)
	c.answers.Put(resp, answer{reply: reply, st: st})
	return resp, nil
}
