package grpcidem_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemkit/idem/grpcidem/internal/sample"
	"github.com/idemkit/idem/server"
)

// TestMiddlewareRefusesGRPC: a keyed gRPC call that reaches the HTTP
// middleware (a grpc-go client, HTTP/2 without TLS) is refused in gRPC's
// own terms, UNIMPLEMENTED with an ErrorInfo naming protocol-unsupported,
// and the handler does not run.
func TestMiddlewareRefusesGRPC(t *testing.T) {
	var runs atomic.Int64
	mw := server.Middleware(nil, server.Config{Logger: slog.New(slog.DiscardHandler),
		Route: func(r *http.Request) string { return r.URL.Path }})
	srv := httptest.NewUnstartedServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1) })))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	cc, err := grpc.NewClient(srv.Listener.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	_, err = sample.Pay(keyed(t.Context(), uuid.NewString(), "acme"), cc, payment(t, 5))
	st := status.Convert(err)
	assert.Equal(t, codes.Unimplemented, st.Code(), "code of %v", err)
	assert.Equal(t, "protocol-unsupported", errorInfo(t, st).GetMetadata()["problem"])
	assert.Zero(t, runs.Load(), "handler runs")
}

// TestMiddlewareConnectErrors: a refusal of a Connect unary request is a
// Connect error: the code's HTTP status, its name, and the ErrorInfo and
// RetryInfo details in protobuf encoding.
func TestMiddlewareConnectErrors(t *testing.T) {
	running, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(running)
		<-release
	})
	mw := server.Middleware(nil, server.Config{Mode: server.Leased, Logger: slog.New(slog.DiscardHandler)})
	mux := http.NewServeMux()
	mux.Handle("POST /pay.v1.Payments/Pay", mw(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	key := uuid.NewString()
	send := func() *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/pay.v1.Payments/Pay", bytes.NewReader([]byte(`{}`)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connect-Protocol-Version", "1")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = send().Body.Close()
	}()
	<-running
	resp := send()
	close(release)
	<-done
	defer resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	var body struct {
		Code    string `json:"code"`
		Details []struct{ Type, Value string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, "aborted", body.Code)
	require.Len(t, body.Details, 2, "ErrorInfo and RetryInfo")
	var info errdetails.ErrorInfo
	var retry errdetails.RetryInfo
	require.NoError(t, proto.Unmarshal(decode64(t, body.Details[0].Value), &info))
	require.NoError(t, proto.Unmarshal(decode64(t, body.Details[1].Value), &retry))
	assert.Equal(t, "google.rpc.ErrorInfo", body.Details[0].Type)
	assert.Equal(t, "KEY_IN_FLIGHT", info.GetReason())
	assert.Equal(t, "key-in-flight", info.GetMetadata()["problem"])
	assert.Equal(t, "in-flight", info.GetMetadata()["operationState"])
	assert.Equal(t, "false", info.GetMetadata()["safeNewKey"])
	assert.NotEmpty(t, info.GetMetadata()["operationRef"])
	assert.Positive(t, retry.GetRetryDelay().GetSeconds(), "RetryInfo's delay")
}

func decode64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawStdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}
