package connectidem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/connectidem"
	"github.com/idemkit/idem/internal/rpcidem/rpctest"
)

// dropFirst answers UNAVAILABLE in place of the first n answers, after the
// call ran: a response lost after the handler committed.
func dropFirst(n int64) connect.Interceptor {
	var dropped atomic.Int64
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			resp, err := next(ctx, req)
			if dropped.Add(1) <= n {
				return nil, connect.NewError(connect.CodeUnavailable, errors.New("dropped after commit"))
			}
			return resp, err
		}
	})
}

// TestClientRetriesWithOneKey: over each protocol, answers lost after
// the handler ran are retried with the call's one key, and the retry gets
// the first run's answer: the handler runs once.
func TestClientRetriesWithOneKey(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			c := &counter{}
			url := serve(t, nil, connectidem.Config{}, c, dropFirst(2))
			client := newClient(url, append(p.opts, connect.WithInterceptors(connectidem.NewClientInterceptor(rpctest.FastRetries(&keys, &mu))))...)
			resp, err := client.CallUnary(t.Context(), payment(t, 7, ""))
			require.NoError(t, err)
			assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
			assert.EqualValues(t, 1, resp.Msg.GetFields()["payment"].GetNumberValue(), "the first run's answer")
			assert.Equal(t, "true", resp.Header().Get("Idempotent-Replayed"))
			require.Len(t, keys, 3, "attempts")
			assert.NotEmpty(t, keys[0])
			assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys, "one key for every attempt")
		})
	}
}

// TestClientFinalAnswer: a refusal of the request (INVALID_ARGUMENT)
// comes back after one attempt, with its code and message.
func TestClientFinalAnswer(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	c := &counter{answer: func(ctx context.Context, n int64, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no amount"))
	}}
	client := newClient(serve(t, nil, connectidem.Config{}, c), connect.WithInterceptors(connectidem.NewClientInterceptor(rpctest.FastRetries(&keys, &mu))))
	_, err := client.CallUnary(t.Context(), payment(t, 7, ""))
	assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	assert.Len(t, keys, 1, "attempts")
}

// TestClientHonoursRetryInfo: a RetryInfo the deadline cannot cover ends
// the call at once with the client's deadline error, one attempt made.
func TestClientHonoursRetryInfo(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	c := &counter{answer: func(ctx context.Context, n int64, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		ce := connect.NewError(connect.CodeUnavailable, errors.New("busy"))
		d, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Minute)})
		require.NoError(t, err)
		ce.AddDetail(d)
		return nil, ce
	}}
	client := newClient(serve(t, nil, connectidem.Config{}, c), connect.WithInterceptors(connectidem.NewClientInterceptor(rpctest.FastRetries(&keys, &mu))))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := client.CallUnary(ctx, payment(t, 7, ""))
	var ie *idem.Error
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, idem.ErrDeadline)
	assert.Equal(t, time.Minute, ie.RetryAfter)
	assert.Equal(t, connect.CodeDeadlineExceeded, connect.CodeOf(err))
	assert.Len(t, keys, 1, "attempts")
}
