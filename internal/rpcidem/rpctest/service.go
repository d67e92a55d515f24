package rpctest

import (
	"context"
	"errors"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/internal/adaptertest"
)

// The codes the helpers use, numbered as gRPC's and Connect's.
const (
	codeCanceled           = 1
	codeInvalidArgument    = 3
	codeDeadlineExceeded   = 4
	codeResourceExhausted  = 8
	codeFailedPrecondition = 9
	codeAborted            = 10
	codeInternal           = 13
	codeUnavailable        = 14
	codeUnauthenticated    = 16
)

// Pay runs app.Pay for a request message (account, body): the response
// message (payment_id, account_id, amount_cents), or the error and the
// code it is answered with.
func Pay(ctx context.Context, app *adaptertest.App, req *structpb.Struct) (*structpb.Struct, int, error) {
	f := req.GetFields()
	p, err := app.Pay(ctx, f["account"].GetStringValue(), []byte(f["body"].GetStringValue()))
	switch {
	case errors.Is(err, adaptertest.ErrInvalid):
		return nil, codeInvalidArgument, err
	case errors.Is(err, adaptertest.ErrDown):
		return nil, codeUnavailable, err
	case err != nil:
		return nil, codeInternal, err
	}
	msg, err := structpb.NewStruct(map[string]any{"payment_id": p.ID, "account_id": p.Account, "amount_cents": float64(p.AmountCents)})
	if err != nil {
		return nil, codeInternal, err
	}
	return msg, 0, nil
}

// RequestID is the key of a request message: its request_id (AIP-155).
func RequestID(req any) string {
	return req.(*structpb.Struct).GetFields()["request_id"].GetStringValue()
}

type callerKey struct{}

// WithCaller is ctx carrying the caller that Caller reads.
func WithCaller(ctx context.Context, tenant, principal string) context.Context {
	return context.WithValue(ctx, callerKey{}, [2]string{tenant, principal})
}

// Caller is the caller in ctx, empty when there is none.
func Caller(ctx context.Context) (tenant, principal string) {
	c, _ := ctx.Value(callerKey{}).([2]string)
	return c[0], c[1]
}
