package connectidem

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/rpcidem"
	"github.com/idemkit/idem/internal/wire"
)

// NewClientInterceptor returns a client interceptor that sends each unary
// call through idem's client (an [idem.Transport] made from cfg, whose
// Base must be nil): one key per logical call (a new UUID, or the one of
// [idem.WithKey]) in the Idempotency-Key header of every attempt; retries
// of what is safe with full jitter inside the deadline, the retry budget
// and a breaker per host, with the same options, errors and
// [idem.Observer] events as the HTTP client. A call waits for its target
// as gRPC's wait-for-ready does (see grpcidem.UnaryClientInterceptor): an
// attempt whose dial fails (refused, unreachable, the name not resolved:
// nothing was sent) dials again after cfg.Backoff's waits, spending no
// attempt, retry token nor breaker failure, until the call's deadline
// (DEADLINE_EXCEEDED) and, in all, cfg.MaxWait (zero: 30 s), past which
// the failed dial is an UNAVAILABLE answer that idem retries within
// MaxAttempts; cfg.FailFast turns the wait off. Each attempt is judged as the
// HTTP response of its code (docs/CONTRACT.md §11; an idem refusal by its
// ErrorInfo); a RetryInfo is its Retry-After, rounded up to whole seconds.
// A call that ends on an answer returns it; one that ends on a local
// decision returns a *connect.Error (UNAVAILABLE, or DEADLINE_EXCEEDED and
// CANCELED for the context's errors) that unwraps to the [*idem.Error].
// It panics when cfg.Base is set; hedging must not be used with it. The
// interceptor is safe for concurrent use.
func NewClientInterceptor(cfg idem.Config) connect.Interceptor {
	t := rpcidem.NewTransport(cfg, attempts{}, "connectidem: NewClientInterceptor's idem.Config.Base must be nil: each attempt is the Connect call")
	bound, backoff := rpcidem.ReadyWait(cfg), cfg.Backoff
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if !req.Spec().IsClient {
				return next(ctx, req)
			}
			c := &call{req: req, next: next, backoff: backoff, rand: realRand}
			c.waited.Bound = bound
			u, err := url.Parse(req.Spec().Procedure)
			if err == nil && req.Peer().Addr != "" {
				u.Scheme, u.Host = "connect", req.Peer().Addr
			}
			r, err := http.NewRequestWithContext(rpcidem.WithCall(ctx, c), http.MethodPost, u.String(), nil)
			if err != nil {
				return nil, connect.NewError(connect.CodeInternal, err)
			}
			resp, err := t.RoundTrip(r)
			if err != nil {
				return nil, localError(err)
			}
			_ = resp.Body.Close()
			a, ok := c.answers.Get(resp)
			if !ok {
				return nil, connect.NewError(connect.CodeInternal, errors.New("connectidem: the client returned an answer it was not given"))
			}
			return a.resp, a.err
		}
	})
}

// localError is a call ended by a local decision of idem's client.
func localError(err error) *connect.Error {
	return connect.NewError(connect.Code(rpcidem.LocalCode(err)), err)
}

// call is one logical call and the answer of each of its attempts.
type call struct {
	req  connect.AnyRequest
	next connect.UnaryFunc

	answers rpcidem.Answers[answer]
	waited  rpcidem.Waited // for the target to be reachable; a zero Bound: fail-fast
	backoff idem.Backoff   // between dials of an unreachable target
	rand    func() float64 // the backoff's jitter
}

type answer struct {
	resp connect.AnyResponse
	err  error
}

// attempts is the Base of the interceptor's transport: each round trip is
// one attempt of the call in the request's context.
type attempts struct{}

// RoundTrip makes one attempt with the request's key and answers with a
// response whose status is the code's. While the target cannot be
// reached (its dials fail: nothing was sent), it dials again after a wait,
// within the call's deadline and wait bound (awaitTarget).
func (attempts) RoundTrip(r *http.Request) (*http.Response, error) {
	c, ok := rpcidem.CallFrom[*call](r.Context())
	if !ok {
		return nil, errors.New("connectidem: a request that is no Connect call reached the interceptor's transport")
	}
	if key := r.Header.Get(idem.KeyHeader); key != "" {
		c.req.Header().Set(wire.HeaderKey, key)
	}
	resp, err := c.next(r.Context(), c.req)
	var prev time.Duration
	for n := 0; unreachable(err); n++ { // wait for the target, sending nothing
		wait, ok, werr := c.awaitTarget(r.Context(), n, prev)
		if werr != nil {
			return nil, werr
		}
		if !ok {
			break
		}
		prev = wait
		resp, err = c.next(r.Context(), c.req)
	}
	if err != nil && r.Context().Err() != nil {
		return nil, r.Context().Err()
	}
	hr := response(r, err)
	rpcidem.CopyOutcome(hr.Header, answerHeader(resp, err))
	c.answers.Put(hr, answer{resp: resp, err: err})
	return hr, nil
}

// response is an attempt's answer as the HTTP client judges it.
func response(r *http.Request, err error) *http.Response {
	code := 0
	if err != nil {
		code = int(connect.CodeOf(err))
	}
	resp := &http.Response{StatusCode: wire.RPCStatus(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: r}
	if code == int(connect.CodeAborted) {
		resp.StatusCode = http.StatusConflict
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		readDetails(resp, ce)
	}
	resp.Status = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	return resp
}

// readDetails applies an error's ErrorInfo (an idem refusal, as its
// problem) and RetryInfo (as Retry-After) to resp.
func readDetails(resp *http.Response, ce *connect.Error) {
	var wait time.Duration
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue
		}
		switch v := v.(type) {
		case *errdetails.ErrorInfo:
			if name := v.GetMetadata()["problem"]; v.GetDomain() == wire.ErrorDomain && name != "" {
				p := wire.Problem{Type: wire.DefaultProblemPrefix + name, Title: ce.Message(), Status: wire.ProblemStatus(name, resp.StatusCode)}
				rec := rpcidem.NewRecorder(resp.Header)
				wire.WriteProblem(rec, p)
				resp.StatusCode, resp.Body, resp.ContentLength = p.Status, io.NopCloser(bytes.NewReader(rec.Body.Bytes())), int64(rec.Body.Len())
			}
		case *errdetails.RetryInfo:
			wait = v.GetRetryDelay().AsDuration()
		}
	}
	if wait > 0 {
		resp.Header.Set(wire.HeaderRetryAfter, strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
	}
}
