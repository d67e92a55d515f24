package rpcidem

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/idemkit/idem"
)

// NewTransport is the idem.Transport of a client interceptor: cfg with
// base as its Base, each of whose round trips is one attempt of the call.
// It panics with msg when cfg.Base is set.
func NewTransport(cfg idem.Config, base http.RoundTripper, msg string) *idem.Transport {
	if cfg.Base != nil {
		panic(msg)
	}
	cfg.Base = base
	return idem.NewTransport(cfg)
}

// The codes of LocalCode, numbered as gRPC's and Connect's.
const (
	codeCanceled         = 1
	codeDeadlineExceeded = 4
	codeUnavailable      = 14
)

// LocalCode is the code of a call that idem's client ended by a local
// decision (err): DEADLINE_EXCEEDED for the context's deadline or
// idem.ErrDeadline, CANCELED for the context's cancellation, UNAVAILABLE
// otherwise (budget, breaker).
func LocalCode(err error) int {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, idem.ErrDeadline):
		return codeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codeCanceled
	}
	return codeUnavailable
}

type callKey[C any] struct{}

// WithCall is ctx carrying the call c to the transport's Base.
func WithCall[C any](ctx context.Context, c C) context.Context {
	return context.WithValue(ctx, callKey[C]{}, c)
}

// CallFrom is the call WithCall put in ctx.
func CallFrom[C any](ctx context.Context) (C, bool) {
	c, ok := ctx.Value(callKey[C]{}).(C)
	return c, ok
}

// Answers holds each attempt's answer by the response that stands for it
// in idem's client. Its zero value is empty and ready; it is safe for
// concurrent use.
type Answers[A any] struct {
	mu     sync.Mutex
	byResp map[*http.Response]A
}

// Put keeps a as the answer of resp.
func (a *Answers[A]) Put(resp *http.Response, v A) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byResp == nil {
		a.byResp = map[*http.Response]A{}
	}
	a.byResp[resp] = v
}

// Get is the answer of resp, if one was put.
func (a *Answers[A]) Get(resp *http.Response) (A, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.byResp[resp]
	return v, ok
}
