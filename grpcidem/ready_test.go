package grpcidem_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/grpcidem"
	"github.com/idemkit/idem/grpcidem/internal/sample"
	"github.com/idemkit/idem/internal/rpcidem/rpctest"
	"github.com/idemkit/idem/server"
)

// downTarget is rpctest's address nothing listens on (yet), with a
// client of it and the server that brings it up.
type downTarget struct{ *rpctest.DownTarget }

func newDownTarget(t *testing.T) downTarget { return downTarget{rpctest.NewDownTarget(t)} }

// dial connects to the target as grpc-go's dialer would, and reports a
// refusal.
func (d downTarget) dial(ctx context.Context, addr string) (net.Conn, error) {
	return d.Dial(ctx, "tcp", addr)
}

// client is a connection to the target through the client interceptor
// with cfg (FastRetries when zero), which reconnects within milliseconds.
func (d downTarget) client(t *testing.T, cfg idem.Config, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if cfg.Observer.OnAttempt == nil {
		fast := rpctest.FastRetries(&d.Keys, &d.Mu)
		cfg.Backoff, cfg.Observer = fast.Backoff, fast.Observer
	}
	cc, err := grpc.NewClient(d.Addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(d.dial),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: time.Second}),
		grpc.WithUnaryInterceptor(grpcidem.UnaryClientInterceptor(cfg)))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// up serves p behind the server interceptor on the target's address.
func (d downTarget) up(t *testing.T, p sample.Payer) {
	t.Helper()
	lis, err := net.Listen("tcp", d.Addr)
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpcidem.UnaryServerInterceptor(nil, grpcidem.Config{Server: server.Config{Logger: slog.New(slog.DiscardHandler)}})))
	sample.Register(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}

type outcome struct {
	err error
}

// pay calls Pay in the background and returns where its error will be.
func pay(t *testing.T, ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) <-chan outcome {
	done := make(chan outcome, 1)
	req := payment(t, 7)
	go func() {
		_, err := sample.Pay(ctx, cc, req, opts...)
		done <- outcome{err: err}
	}()
	return done
}

// TestClientWaitsForTheTarget: a call made while its target refuses every
// dial waits, sending nothing, as gRPC's wait-for-ready does; the target
// comes up (once the test saw a dial refused) within the call's deadline,
// and the call completes with one attempt, run once.
func TestClientWaitsForTheTarget(t *testing.T) {
	d := newDownTarget(t)
	cc := d.client(t, idem.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := pay(t, ctx, cc)
	<-d.Refused
	c := &counter{}
	d.up(t, c)
	res := <-done
	require.NoError(t, res.err)
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
	assert.Len(t, d.Keys, 1, "attempts: none was spent on the refused dials")
}

// TestClientWaitsUntilTheDeadline: a call whose target never comes up
// fails at its deadline with DEADLINE_EXCEEDED, having sent nothing.
func TestClientWaitsUntilTheDeadline(t *testing.T) {
	d := newDownTarget(t)
	cc := d.client(t, idem.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	res := <-pay(t, ctx, cc)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(res.err), "%v", res.err)
	assert.ErrorIs(t, res.err, context.DeadlineExceeded)
	select {
	case <-d.Refused:
	default:
		t.Error("no dial was refused")
	}
}

// TestClientFailsFastWhenAsked: a caller's grpc.WaitForReady(false), a
// ClientConn's default of it, a method's service config saying
// waitForReady false, or Config.FailFast make the call fail fast
// on a target that refuses its dials: UNAVAILABLE after idem's retries,
// long before the deadline; so does a call that waited Config.MaxWait.
func TestClientFailsFastWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  idem.Config
		opts []grpc.CallOption
		dial []grpc.DialOption
	}{
		{"WaitForReady(false)", idem.Config{}, []grpc.CallOption{grpc.WaitForReady(false)}, nil},
		{"the ClientConn's WaitForReady(false)", idem.Config{}, nil, []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.WaitForReady(false))}},
		{"the service config's waitForReady false", idem.Config{}, nil, []grpc.DialOption{grpc.WithDefaultServiceConfig(
			`{"methodConfig": [{"name": [{"service": "idem.sample.Payments"}], "waitForReady": false}]}`)}},
		{"FailFast", idem.Config{FailFast: true}, nil, nil},
		{"MaxWait", idem.Config{MaxWait: 50 * time.Millisecond}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDownTarget(t)
			cfg := tc.cfg
			fast := rpctest.FastRetries(&d.Keys, &d.Mu)
			cfg.Backoff, cfg.Observer = fast.Backoff, fast.Observer
			cc := d.client(t, cfg, tc.dial...)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // shorter than MaxWait's default
			defer cancel()
			res := <-pay(t, ctx, cc, tc.opts...)
			assert.Equal(t, codes.Unavailable, status.Code(res.err), "%v", res.err)
			assert.NoError(t, ctx.Err(), "the call ended before its deadline")
		})
	}
}
