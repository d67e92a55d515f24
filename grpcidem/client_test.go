package grpcidem_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/grpcidem"
	"github.com/idemkit/idem/grpcidem/internal/sample"
	"github.com/idemkit/idem/internal/rpcidem/rpctest"
	"github.com/idemkit/idem/server"
)

// rig serves the sample service with outer (a fault) in front of the
// server interceptor, and dials it with the client interceptor.
func rig(t *testing.T, outer grpc.UnaryServerInterceptor, p sample.Payer, cfg idem.Config) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(outer,
		grpcidem.UnaryServerInterceptor(nil, grpcidem.Config{Server: server.Config{Logger: slog.New(slog.DiscardHandler)}})))
	sample.Register(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpcidem.UnaryClientInterceptor(cfg)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// dropFirst answers UNAVAILABLE in place of the first n answers, after the
// call ran: a response lost after the handler committed.
func dropFirst(n int64) grpc.UnaryServerInterceptor {
	var dropped atomic.Int64
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if dropped.Add(1) <= n {
			return nil, status.Error(codes.Unavailable, "dropped after commit")
		}
		return resp, err
	}
}

func pass(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(ctx, req)
}

// TestClientRetriesWithOneKey: answers lost after the handler ran are
// retried with the call's one key, and the retry gets the first run's
// answer: the handler runs once.
func TestClientRetriesWithOneKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	c := &counter{}
	cc := rig(t, dropFirst(2), c, rpctest.FastRetries(&keys, &mu))
	resp, err := sample.Pay(t.Context(), cc, payment(t, 7))
	require.NoError(t, err)
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
	assert.EqualValues(t, 1, resp.GetFields()["payment"].GetNumberValue(), "the first run's answer")
	require.Len(t, keys, 3, "attempts")
	assert.NotEmpty(t, keys[0])
	assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys, "one key for every attempt")
}

// TestClientKeyFromContext: idem.WithKey names the call's key.
func TestClientKeyFromContext(t *testing.T) {
	var got []string
	c := &counter{answer: func(ctx context.Context, n int64, req *structpb.Struct) (*structpb.Struct, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		got = md.Get(grpcidem.MetadataKey)
		return structpb.NewStruct(nil)
	}}
	var mu sync.Mutex
	var keys []string
	cc := rig(t, pass, c, rpctest.FastRetries(&keys, &mu))
	_, err := sample.Pay(idem.WithKey(t.Context(), "order-42"), cc, payment(t, 7))
	require.NoError(t, err)
	assert.Equal(t, []string{"order-42"}, got)
}

// TestClientFinalAnswers: an answer that is final (INVALID_ARGUMENT, or
// key-reused) comes back after one attempt, with its status.
func TestClientFinalAnswers(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	c := &counter{answer: func(ctx context.Context, n int64, req *structpb.Struct) (*structpb.Struct, error) {
		return nil, status.Error(codes.InvalidArgument, "no amount")
	}}
	cc := rig(t, pass, c, rpctest.FastRetries(&keys, &mu))
	_, err := sample.Pay(t.Context(), cc, payment(t, 7))
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Equal(t, "no amount", status.Convert(err).Message())
	assert.Len(t, keys, 1, "attempts")
}

// TestClientHonoursRetryInfo: a RetryInfo that the deadline cannot cover
// ends the call at once with the client's deadline error, without a
// second attempt; so does a pushback trailer.
func TestClientHonoursRetryInfo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(ctx context.Context) error
	}{
		{"RetryInfo", func(ctx context.Context) error {
			st, _ := status.New(codes.Unavailable, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Minute)})
			return st.Err()
		}},
		{"pushback", func(ctx context.Context) error {
			_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", "60000"))
			return status.Error(codes.Unavailable, "busy")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			c := &counter{answer: func(ctx context.Context, n int64, req *structpb.Struct) (*structpb.Struct, error) {
				return nil, tc.answer(ctx)
			}}
			cc := rig(t, pass, c, rpctest.FastRetries(&keys, &mu))
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			_, err := sample.Pay(ctx, cc, payment(t, 7))
			var ie *idem.Error
			require.True(t, errors.As(err, &ie), "an *idem.Error: %v", err)
			assert.ErrorIs(t, err, idem.ErrDeadline)
			assert.Equal(t, time.Minute, ie.RetryAfter)
			assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
			assert.Len(t, keys, 1, "attempts")
		})
	}
}

// TestClientErrorSaysWhereTheOperationStands: a call that ends on a local
// decision after an answer that said where its operation stands (header
// metadata) returns an *idem.Error that says it too, as over HTTP.
func TestClientErrorSaysWhereTheOperationStands(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	sample.Register(srv, sample.PayFunc(func(ctx context.Context, _ *structpb.Struct) (*structpb.Struct, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs(grpcidem.MetadataOperationState, "in-flight", grpcidem.MetadataOperationRef, "ab12",
			grpcidem.MetadataSafeNewKey, "false"))
		st, _ := status.New(codes.Unavailable, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Minute)})
		return nil, st.Err()
	}))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	var mu sync.Mutex
	var keys []string
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpcidem.UnaryClientInterceptor(rpctest.FastRetries(&keys, &mu))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = sample.Pay(ctx, cc, payment(t, 7))
	var ie *idem.Error
	require.True(t, errors.As(err, &ie), "an *idem.Error: %v", err)
	assert.Equal(t, "in-flight", ie.OperationState)
	assert.Equal(t, "ab12", ie.OperationRef)
	assert.True(t, ie.MayHaveTakenEffect, "a new key is not safe")
}
