package connectidem_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/connectidem"
	"github.com/idemkit/idem/internal/rpcidem/rpctest"
	"github.com/idemkit/idem/server"
)

// downTarget is rpctest's address nothing listens on (yet), with a
// client of it and the server that brings it up.
type downTarget struct{ *rpctest.DownTarget }

func newDownTarget(t *testing.T) downTarget { return downTarget{rpctest.NewDownTarget(t)} }

// client is a client of the sample service at the target through the
// client interceptor with cfg and FastRetries' backoff and observer.
func (d downTarget) client(t *testing.T, cfg idem.Config) *connect.Client[structpb.Struct, structpb.Struct] {
	t.Helper()
	fast := rpctest.FastRetries(&d.Keys, &d.Mu)
	cfg.Backoff, cfg.Observer = fast.Backoff, fast.Observer
	tr := &http.Transport{Protocols: new(http.Protocols), DialContext: d.Dial}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return connect.NewClient[structpb.Struct, structpb.Struct](&http.Client{Transport: tr}, "http://"+d.Addr+procedure,
		connect.WithGRPC(), connect.WithInterceptors(connectidem.NewClientInterceptor(cfg)))
}

// up serves c behind the server interceptor on the target's address.
func (d downTarget) up(t *testing.T, c *counter) {
	t.Helper()
	lis, err := net.Listen("tcp", d.Addr)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(procedure, connect.NewUnaryHandler(procedure, c.pay, connect.WithInterceptors(
		connectidem.NewServerInterceptor(nil, connectidem.Config{Server: server.Config{Logger: slog.New(slog.DiscardHandler)}}))))
	srv := &http.Server{Handler: mux, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// TestClientWaitsForTheTarget: a call made while its target refuses every
// dial waits, sending nothing, and dials again; the target comes up (once
// the test saw a dial refused) within the call's deadline, and the call
// completes with one attempt, run once.
func TestClientWaitsForTheTarget(t *testing.T) {
	d := newDownTarget(t)
	client := d.client(t, idem.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	req := payment(t, 7, "")
	go func() {
		_, err := client.CallUnary(ctx, req)
		done <- err
	}()
	<-d.Refused
	c := &counter{}
	d.up(t, c)
	require.NoError(t, <-done)
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
	assert.Len(t, d.Keys, 1, "attempts: none was spent on the refused dials")
}

// TestClientWaitsUntilTheDeadline: a call whose target never comes up
// fails by its deadline with DEADLINE_EXCEEDED, having sent nothing;
// Config.FailFast, or a call that waited Config.MaxWait, fails at once
// with UNAVAILABLE instead.
func TestClientWaitsUntilTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  idem.Config
		code connect.Code
	}{
		{"waits", idem.Config{}, connect.CodeDeadlineExceeded},
		{"FailFast", idem.Config{FailFast: true}, connect.CodeUnavailable},
		{"MaxWait", idem.Config{MaxWait: 50 * time.Millisecond}, connect.CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDownTarget(t)
			client := d.client(t, tc.cfg)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			_, err := client.CallUnary(ctx, payment(t, 7, ""))
			assert.Equal(t, tc.code, connect.CodeOf(err), "%v", err)
			if tc.code == connect.CodeUnavailable {
				assert.NoError(t, ctx.Err(), "the call ended before its deadline")
			}
			select {
			case <-d.Refused:
			default:
				t.Error("no dial was refused")
			}
		})
	}
}
