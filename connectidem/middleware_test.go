package connectidem_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/server"
)

// TestMiddlewareCommitFailedIsAConnectError: a connect-go client calling
// a handler behind the HTTP middleware (the Connect protocol) whose
// outcome could not be committed gets a Connect error it can act on:
// UNAVAILABLE, the ErrorInfo naming commit-failed with where the
// operation stands, and the RetryInfo of the store lost; never a problem
// document, which it would read as UNKNOWN.
func TestMiddlewareCommitFailedIsAConnectError(t *testing.T) {
	c := &counter{}
	mw := server.Middleware(&lostOnComplete{server.NewMemoryStore()}, server.Config{Logger: slog.New(slog.DiscardHandler)})
	mux := http.NewServeMux()
	mux.Handle("POST "+procedure, mw(connect.NewUnaryHandler(procedure, c.pay)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	client := connect.NewClient[structpb.Struct, structpb.Struct](srv.Client(), srv.URL+procedure)
	_, err := client.CallUnary(t.Context(), payment(t, 5, uuid.NewString()))
	require.Error(t, err)
	assert.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "%v", err)
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		switch v := v.(type) {
		case *errdetails.ErrorInfo:
			info = v
		case *errdetails.RetryInfo:
			retry = v
		}
	}
	require.NotNil(t, info, "an ErrorInfo")
	assert.Equal(t, "commit-failed", info.GetMetadata()["problem"])
	require.NotNil(t, retry, "a RetryInfo")
	assert.Positive(t, retry.GetRetryDelay().AsDuration())
	assert.Equal(t, "unknown", ce.Meta().Get("Idempotency-Operation-State"))
}

// lostOnComplete is a memory store that loses its connection when an
// attempt completes: the outcome is unknown.
type lostOnComplete struct{ *server.MemoryStore }

func (s *lostOnComplete) Claim(ctx context.Context, c *server.Claim) (server.ClaimResult, error) {
	res, err := s.MemoryStore.Claim(ctx, c)
	if err == nil && res.Attempt != nil {
		res.Attempt = lostAttempt{res.Attempt}
	}
	return res, err
}

type lostAttempt struct{ server.Attempt }

func (a lostAttempt) Complete(ctx context.Context, _ *server.Response) error {
	_ = a.Abort(ctx, false)
	return fmt.Errorf("server: complete: %w", io.ErrUnexpectedEOF)
}
