package connectidem_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/connectidem"
	"github.com/idemkit/idem/server"
)

// TestReplayEachProtocol: over Connect, gRPC and gRPC-Web, a retry gets
// the first answer's message and allowlisted headers and trailers, marked
// replayed, and the handler runs once; both answers say where the
// operation stands.
func TestReplayEachProtocol(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := &counter{}
			c.answer = func(ctx context.Context, n int64, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
				msg, err := structpb.NewStruct(map[string]any{"payment": float64(n), "z": "last", "a": "first"})
				resp := connect.NewResponse(msg)
				resp.Header().Set("Payment-Id", "p1")
				resp.Header().Set("X-Debug", "once")
				resp.Trailer().Set("Ledger", "l1")
				return resp, err
			}
			url := serve(t, nil, connectidem.Config{Headers: []string{"payment-id", "Ledger"}}, c)
			client := newClient(url, p.opts...)
			key := uuid.NewString()
			first, err := client.CallUnary(t.Context(), payment(t, 5, key))
			require.NoError(t, err)
			second, err := client.CallUnary(t.Context(), payment(t, 5, key))
			require.NoError(t, err)
			assert.True(t, proto.Equal(first.Msg, second.Msg), "replay %v, want %v", second.Msg, first.Msg)
			assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
			assert.Empty(t, first.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, "true", second.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, "p1", second.Header().Get("Payment-Id"))
			assert.Empty(t, second.Header().Get("X-Debug"), "a header outside the allowlist is not replayed")
			assert.Equal(t, "l1", second.Trailer().Get("Ledger"))
			for _, h := range []http.Header{first.Header(), second.Header()} {
				assert.Equal(t, "completed", h.Get("Idempotency-Operation-State"))
				assert.Equal(t, "false", h.Get("Idempotency-Safe-New-Key"))
				assert.NotEmpty(t, h.Get("Idempotency-Key-Expires"))
			}
			assert.NotEmpty(t, first.Header().Get("Idempotency-Operation-Ref"))
			assert.Equal(t, first.Header().Get("Idempotency-Operation-Ref"), second.Header().Get("Idempotency-Operation-Ref"))
		})
	}
}

// TestStoredErrorReplays: an error that is the operation's outcome
// (ALREADY_EXISTS) is stored with its details and replayed; one that
// fails (UNAVAILABLE) is not, and a retry runs afresh.
func TestStoredErrorReplays(t *testing.T) {
	for _, tc := range []struct {
		code     connect.Code
		wantRuns int64
	}{{connect.CodeAlreadyExists, 1}, {connect.CodeUnavailable, 2}, {connect.CodeInvalidArgument, 2}} {
		t.Run(tc.code.String(), func(t *testing.T) {
			c := &counter{answer: func(ctx context.Context, n int64, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
				ce := connect.NewError(tc.code, assert.AnError)
				d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: "R", Domain: "pay"})
				require.NoError(t, err)
				ce.AddDetail(d)
				return nil, ce
			}}
			client := newClient(serve(t, nil, connectidem.Config{}, c))
			key := uuid.NewString()
			_, err1 := client.CallUnary(t.Context(), payment(t, 5, key))
			_, err2 := client.CallUnary(t.Context(), payment(t, 5, key))
			assert.Equal(t, tc.wantRuns, c.runs.Load(), "handler runs")
			assert.Equal(t, connect.CodeOf(err1), connect.CodeOf(err2))
			assert.Equal(t, err1.Error(), err2.Error())
			var ce *connect.Error
			require.ErrorAs(t, err2, &ce)
			require.Len(t, ce.Details(), 1)
			assert.Equal(t, tc.wantRuns == 1, ce.Meta().Get("Idempotent-Replayed") == "true", "replayed marker")
		})
	}
}

// TestRefusals: each refusal is a *connect.Error of its code with an
// ErrorInfo naming the problem, in every protocol, and the handler does
// not run.
func TestRefusals(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := &counter{}
			client := newClient(serve(t, nil, connectidem.Config{}, c), p.opts...)
			key := uuid.NewString()
			_, err := client.CallUnary(t.Context(), payment(t, 5, key))
			require.NoError(t, err)
			for _, tc := range []struct {
				name    string
				req     *connect.Request[structpb.Struct]
				code    connect.Code
				problem string
			}{
				{"missing", payment(t, 5, ""), connect.CodeInvalidArgument, "key-missing"},
				{"invalid", payment(t, 5, strings.Repeat("k", 256)), connect.CodeInvalidArgument, "key-invalid"},
				{"reused", payment(t, 6, key), connect.CodeFailedPrecondition, "key-reused"},
			} {
				_, err := client.CallUnary(t.Context(), tc.req)
				assert.Equal(t, tc.code, connect.CodeOf(err), "%s: %v", tc.name, err)
				assert.Equal(t, tc.problem, problemOf(t, err), tc.name)
			}
			assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
		})
	}
}

// TestInFlight: a duplicate of a running call gets ABORTED with a
// RetryInfo.
func TestInFlight(t *testing.T) {
	running, release := make(chan struct{}), make(chan struct{})
	c := &counter{answer: func(ctx context.Context, n int64, req *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
		close(running)
		<-release
		return connect.NewResponse(&structpb.Struct{}), nil
	}}
	client := newClient(serve(t, nil, connectidem.Config{Server: server.Config{Mode: server.Leased}}, c))
	key := uuid.NewString()
	done := make(chan error, 1)
	go func() {
		_, err := client.CallUnary(context.Background(), payment(t, 5, key))
		done <- err
	}()
	<-running
	_, err := client.CallUnary(t.Context(), payment(t, 5, key))
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, connect.CodeAborted, connect.CodeOf(err), "%v", err)
	assert.Equal(t, "key-in-flight", problemOf(t, err))
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	var delay bool
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if ri, ok := v.(*errdetails.RetryInfo); ok {
				delay = ri.GetRetryDelay().AsDuration() > 0
			}
		}
	}
	assert.True(t, delay, "a RetryInfo with a delay")
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
}

// problemOf is the idem problem an error's ErrorInfo names.
func problemOf(t *testing.T, err error) string {
	t.Helper()
	var ce *connect.Error
	if !assert.ErrorAs(t, err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetDomain() == "idem" {
				return info.GetMetadata()["problem"]
			}
		}
	}
	return ""
}
