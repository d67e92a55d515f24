package grpcidem

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// waitForReady is what the last grpc.WaitForReady among opts (the
// ClientConn's default call options and the call's own, as an
// interceptor sees them) says; nil when none is there.
func waitForReady(opts []grpc.CallOption) *bool {
	for i := len(opts) - 1; i >= 0; i-- {
		if o, ok := opts[i].(grpc.FailFastCallOption); ok {
			wfr := !o.FailFast
			return &wfr
		}
	}
	return nil
}

// failFast reports whether the call does not wait for its target: its
// call options say grpc.WaitForReady(false), or else its method's service
// config (known once the channel has left IDLE) says waitForReady false.
func (c *call) failFast() bool {
	if c.wfr != nil {
		return !*c.wfr
	}
	wfr := c.cc.GetMethodConfig(c.method).WaitForReady
	return wfr != nil && !*wfr
}

// ready waits, sending nothing, until the call's channel is READY (it
// connects an idle one), within ctx and what is left of the call's wait
// bound, unless the call is fail-fast: a channel in TRANSIENT_FAILURE
// (its dials refused or failing) keeps the attempt here while grpc-go
// reconnects with its own backoff. It returns ctx's error when ctx ended
// first. When the bound ends first, or the channel shuts down, it returns
// nil, and the attempt goes on as grpc-go makes it: fail-fast, it fails
// at once with UNAVAILABLE, unsent, which idem's client judges as it
// judges any answer.
func (c *call) ready(ctx context.Context) error {
	s := c.cc.GetState()
	left := c.waited.Left()
	if s == connectivity.Ready || left == 0 || c.failFast() {
		return nil
	}
	wctx := ctx
	if left > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
	}
	start := time.Now()
	defer func() { c.waited.Add(time.Since(start)) }()
	c.cc.Connect()
	for s = c.cc.GetState(); s != connectivity.Ready && s != connectivity.Shutdown && !c.failFast(); s = c.cc.GetState() {
		if !c.cc.WaitForStateChange(wctx, s) {
			break
		}
	}
	return ctx.Err()
}
