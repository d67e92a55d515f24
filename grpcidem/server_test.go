package grpcidem_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/grpcidem"
	"github.com/idemkit/idem/grpcidem/internal/sample"
	"github.com/idemkit/idem/server"
)

// TestReplayIsExact: a retry gets the first answer's message, status
// details and allowlisted metadata, marked replayed, and the handler runs
// once; metadata outside the allowlist reaches the first answer only. Both
// answers say where the operation stands.
func TestReplayIsExact(t *testing.T) {
	c := &counter{}
	c.answer = func(ctx context.Context, n int64, req *structpb.Struct) (*structpb.Struct, error) {
		require.NoError(t, grpc.SetHeader(ctx, metadata.Pairs("payment-id", "p1", "x-debug", "once")))
		require.NoError(t, grpc.SetTrailer(ctx, metadata.Pairs("ledger", "l1")))
		return structpb.NewStruct(map[string]any{"payment": float64(n), "z": "last", "a": "first"})
	}
	cc := serve(t, nil, grpcidem.Config{Metadata: []string{"Payment-Id", "ledger"}}, c)
	ctx := keyed(t.Context(), uuid.NewString(), "acme")
	var h1, t1, h2, t2 metadata.MD
	first, err := sample.Pay(ctx, cc, payment(t, 5), grpc.Header(&h1), grpc.Trailer(&t1))
	require.NoError(t, err)
	second, err := sample.Pay(ctx, cc, payment(t, 5), grpc.Header(&h2), grpc.Trailer(&t2))
	require.NoError(t, err)
	assert.True(t, proto.Equal(first, second), "replay %v, want %v", second, first)
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
	assert.Equal(t, []string{"once"}, h1.Get("x-debug"))
	assert.Empty(t, h1.Get(grpcidem.MetadataReplayed), "the first answer is not a replay")
	assert.Equal(t, []string{"true"}, h2.Get(grpcidem.MetadataReplayed))
	assert.Equal(t, []string{"p1"}, h2.Get("payment-id"))
	assert.Empty(t, h2.Get("x-debug"), "metadata outside the allowlist is not replayed")
	assert.Equal(t, []string{"l1"}, t2.Get("ledger"))
	for _, h := range []metadata.MD{h1, h2} {
		assert.Equal(t, []string{"completed"}, h.Get(grpcidem.MetadataOperationState))
		assert.Equal(t, []string{"false"}, h.Get(grpcidem.MetadataSafeNewKey))
		assert.Len(t, h.Get(grpcidem.MetadataKeyExpires), 1, "the key's expiry")
	}
	assert.NotEmpty(t, h1.Get(grpcidem.MetadataOperationRef))
	assert.Equal(t, h1.Get(grpcidem.MetadataOperationRef), h2.Get(grpcidem.MetadataOperationRef), "one reference for the operation")
}

// TestStoredStatusReplays: an error answer that is the operation's own
// outcome (ALREADY_EXISTS) is stored with its details and replayed; one
// that refuses the request (INVALID_ARGUMENT) or fails (UNAVAILABLE) is
// not, and a retry runs afresh.
func TestStoredStatusReplays(t *testing.T) {
	for _, tc := range []struct {
		code     codes.Code
		wantRuns int64
	}{{codes.AlreadyExists, 1}, {codes.InvalidArgument, 2}, {codes.Unavailable, 2}, {codes.Aborted, 2}} {
		t.Run(tc.code.String(), func(t *testing.T) {
			c := &counter{answer: func(ctx context.Context, n int64, req *structpb.Struct) (*structpb.Struct, error) {
				st, err := status.New(tc.code, "answer").WithDetails(&errdetails.ErrorInfo{Reason: "R", Domain: "pay"})
				require.NoError(t, err)
				return nil, st.Err()
			}}
			cc := serve(t, nil, grpcidem.Config{}, c)
			ctx := keyed(t.Context(), uuid.NewString(), "acme")
			var h1 metadata.MD
			_, err1 := sample.Pay(ctx, cc, payment(t, 5), grpc.Header(&h1))
			state := map[bool]string{true: "completed", false: "none"}[tc.wantRuns == 1]
			assert.Equal(t, []string{state}, h1.Get(grpcidem.MetadataOperationState), "the first answer's state")
			var h metadata.MD
			_, err2 := sample.Pay(ctx, cc, payment(t, 5), grpc.Header(&h))
			assert.Equal(t, tc.wantRuns, c.runs.Load(), "handler runs")
			assert.True(t, proto.Equal(status.Convert(err1).Proto(), status.Convert(err2).Proto()), "%v, want %v", err2, err1)
			assert.Equal(t, tc.wantRuns == 1, len(h.Get(grpcidem.MetadataReplayed)) == 1, "replayed marker %v", h)
		})
	}
}

// TestRefusals: each refusal is its status, with an ErrorInfo naming the
// problem, and the handler does not run; its header metadata and its
// ErrorInfo say that nothing was done under the key.
func TestRefusals(t *testing.T) {
	c := &counter{}
	cc := serve(t, nil, grpcidem.Config{}, c)
	key := uuid.NewString()
	_, err := sample.Pay(keyed(t.Context(), key, "acme"), cc, payment(t, 5))
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		code    codes.Code
		problem string
	}{
		{"missing", keyed(t.Context(), "", "acme"), codes.InvalidArgument, "key-missing"},
		{"invalid", keyed(t.Context(), strings.Repeat("k", 256), "acme"), codes.InvalidArgument, "key-invalid"},
		{"two keys", metadata.AppendToOutgoingContext(keyed(t.Context(), key, "acme"), grpcidem.MetadataKey, "k2"), codes.InvalidArgument, "key-invalid"},
		{"reused", keyed(t.Context(), key, "acme"), codes.FailedPrecondition, "key-reused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h metadata.MD
			_, err := sample.Pay(tc.ctx, cc, payment(t, 6), grpc.Header(&h))
			st := status.Convert(err)
			assert.Equal(t, tc.code, st.Code(), "code of %v", err)
			info := errorInfo(t, st).GetMetadata()
			assert.Equal(t, tc.problem, info["problem"])
			assert.Equal(t, []string{"none"}, h.Get(grpcidem.MetadataOperationState), "nothing was done under the key")
			assert.Equal(t, []string{"true"}, h.Get(grpcidem.MetadataSafeNewKey))
			assert.Equal(t, "none", info["operationState"], "the ErrorInfo says it too")
			assert.Equal(t, "true", info["safeNewKey"])
		})
	}
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
}

// TestScope: the same key from another caller is another operation.
func TestScope(t *testing.T) {
	c := &counter{}
	cc := serve(t, nil, grpcidem.Config{}, c)
	key := uuid.NewString()
	_, err := sample.Pay(keyed(t.Context(), key, "acme"), cc, payment(t, 5))
	require.NoError(t, err)
	_, err = sample.Pay(keyed(t.Context(), key, "globex"), cc, payment(t, 5))
	require.NoError(t, err)
	assert.EqualValues(t, 2, c.runs.Load(), "handler runs")
}

// TestInFlight: a duplicate of a running call gets ABORTED with a
// RetryInfo and the pushback trailer, and the handler runs once.
func TestInFlight(t *testing.T) {
	running, release := make(chan struct{}), make(chan struct{})
	c := &counter{answer: func(ctx context.Context, n int64, req *structpb.Struct) (*structpb.Struct, error) {
		close(running)
		<-release
		return structpb.NewStruct(nil)
	}}
	cc := serve(t, nil, grpcidem.Config{Server: server.Config{Mode: server.Leased}}, c)
	ctx := keyed(t.Context(), uuid.NewString(), "acme")
	done := make(chan error, 1)
	go func() {
		_, err := sample.Pay(ctx, cc, payment(t, 5))
		done <- err
	}()
	<-running
	var tr metadata.MD
	_, err := sample.Pay(ctx, cc, payment(t, 5), grpc.Trailer(&tr))
	close(release)
	require.NoError(t, <-done)
	st := status.Convert(err)
	assert.Equal(t, codes.Aborted, st.Code(), "code of %v", err)
	assert.Equal(t, "KEY_IN_FLIGHT", errorInfo(t, st).GetReason())
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	assert.Positive(t, delay, "RetryInfo's delay")
	assert.Equal(t, []string{strconv.FormatInt(delay.Milliseconds(), 10)}, tr.Get("grpc-retry-pushback-ms"))
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
}

// TestStoreUnavailable: a claim the store cannot make is UNAVAILABLE with
// a RetryInfo, and the handler does not run.
func TestStoreUnavailable(t *testing.T) {
	c := &counter{}
	cc := serve(t, failingStore{server.NewMemoryStore()}, grpcidem.Config{}, c)
	_, err := sample.Pay(keyed(t.Context(), uuid.NewString(), "acme"), cc, payment(t, 5))
	st := status.Convert(err)
	assert.Equal(t, codes.Unavailable, st.Code(), "code of %v", err)
	assert.Equal(t, "STORE_UNAVAILABLE", errorInfo(t, st).GetReason())
	assert.Zero(t, c.runs.Load(), "handler runs")
}

// TestKeyFromMessage: Config.Key reads an AIP-155 request_id; the
// metadata entry is then ignored.
func TestKeyFromMessage(t *testing.T) {
	c := &counter{}
	cc := serve(t, nil, grpcidem.Config{Key: func(req any) string {
		return req.(*structpb.Struct).GetFields()["request_id"].GetStringValue()
	}}, c)
	req, err := structpb.NewStruct(map[string]any{"amount": 5, "request_id": uuid.NewString()})
	require.NoError(t, err)
	for range 2 {
		_, err = sample.Pay(keyed(t.Context(), uuid.NewString(), "acme"), cc, req)
		require.NoError(t, err)
	}
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
	_, err = sample.Pay(keyed(t.Context(), uuid.NewString(), "acme"), cc, payment(t, 5))
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "a message without request_id: %v", err)
}

// TestKeyOptional: with KeyOptional a call without a key runs each time.
func TestKeyOptional(t *testing.T) {
	c := &counter{}
	cc := serve(t, nil, grpcidem.Config{Server: server.Config{Keys: server.KeyOptional}}, c)
	for range 2 {
		_, err := sample.Pay(keyed(t.Context(), "", "acme"), cc, payment(t, 5))
		require.NoError(t, err)
	}
	assert.EqualValues(t, 2, c.runs.Load(), "handler runs")
}

func errorInfo(t *testing.T, st *status.Status) *errdetails.ErrorInfo {
	t.Helper()
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			assert.Equal(t, grpcidem.ErrorDomain, info.GetDomain())
			return info
		}
	}
	t.Errorf("status %v has no ErrorInfo", st)
	return nil
}

// failingStore is a store whose claims fail.
type failingStore struct{ server.Store }

func (failingStore) Claim(context.Context, *server.Claim) (server.ClaimResult, error) {
	return server.ClaimResult{}, errors.New("store down")
}

// TestFingerprintedMetadata: a metadata entry that Config.Server's
// FingerprintHeaders names (in any case) is part of the fingerprint: a
// retry with the same entry replays, one with another value under the key
// is refused as another request.
func TestFingerprintedMetadata(t *testing.T) {
	c := &counter{}
	cc := serve(t, nil, grpcidem.Config{Server: server.Config{FingerprintHeaders: []string{"X-Account"}}}, c)
	key := uuid.NewString()
	call := func(account string) error {
		ctx := metadata.AppendToOutgoingContext(keyed(t.Context(), key, "acme"), "x-account", account)
		_, err := sample.Pay(ctx, cc, payment(t, 5))
		return err
	}
	require.NoError(t, call("a-1"))
	require.NoError(t, call("a-1"), "the same entry: a replay")
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
	err := call("a-2")
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "another entry under the key: %v", err)
	assert.EqualValues(t, 1, c.runs.Load(), "handler runs")
}
