package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// TestConnectRequestsGetConnectErrors: every refusal of a Connect unary
// request is a Connect error a connect client can act on (its code, the
// ErrorInfo naming the problem, Retry-After where a retry should wait) and
// says where the operation stands (headers, and the ErrorInfo), whether the middleware refuses before
// the handler (store-unavailable, scope-unstorable, deadline-expired,
// key-missing) or after it (commit-failed, a stale completion), which
// used to be answered with a problem document.
func TestConnectRequestsGetConnectErrors(t *testing.T) {
	cases := []struct {
		name    string
		store   server.Store
		cfg     server.Config
		header  http.Header
		noKey   bool
		code    string // the Connect code
		status  int
		problem string
		retry   string // Retry-After
		state   string
	}{
		{name: "commit failed", store: failingComplete(errors.New("server: complete: boom")),
			code: "unavailable", status: http.StatusServiceUnavailable, problem: "commit-failed", state: "unknown"},
		{name: "commit failed, the store lost", store: failingComplete(fmt.Errorf("server: complete: %w", io.ErrUnexpectedEOF)),
			code: "unavailable", status: http.StatusServiceUnavailable, problem: "commit-failed", retry: "1", state: "unknown"},
		{name: "stale completion", store: failingComplete(server.ErrLeaseLost),
			code: "aborted", status: http.StatusConflict, problem: "key-in-flight", retry: "1", state: "in-flight"},
		{name: "store unavailable", store: failingClaim(errors.New("the store is down")),
			code: "unavailable", status: http.StatusServiceUnavailable, problem: "store-unavailable", retry: "1", state: "unknown"},
		{name: "scope unstorable", store: failingClaim(fmt.Errorf("a NUL byte: %w", server.ErrUnstorableScope)),
			code: "invalid_argument", status: http.StatusBadRequest, problem: "scope-unstorable", state: "none"},
		{name: "deadline expired", cfg: server.Config{DeadlineHeader: "Request-Time-Left-Ms"}, header: http.Header{"Request-Time-Left-Ms": {"0"}},
			code: "deadline_exceeded", status: http.StatusGatewayTimeout, problem: "deadline-expired", state: "unknown"},
		{name: "replay forbidden", store: completed(t), cfg: server.Config{AuthorizeReplay: func(*http.Request, server.Operation) error { return errors.New("revoked") }},
			code: "permission_denied", status: http.StatusForbidden, problem: "replay-forbidden", state: "unknown"},
		{name: "key missing", noKey: true,
			code: "invalid_argument", status: http.StatusBadRequest, problem: "key-missing", state: "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey
			if tc.noKey {
				key = ""
			}
			w := serveConnect(tc.store, tc.cfg, key, tc.header)

			assert.Equal(t, tc.status, w.Code, "the HTTP status Connect gives the code")
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"), "a Connect error, not a problem document: %s", w.Body)
			var body struct {
				Code    string
				Message string
				Details []struct{ Type, Value string }
			}
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), "body %s", w.Body)
			assert.Equal(t, tc.code, body.Code)
			require.NotEmpty(t, body.Details, "an ErrorInfo")
			assert.Equal(t, "google.rpc.ErrorInfo", body.Details[0].Type)
			info, err := base64.RawStdEncoding.DecodeString(body.Details[0].Value)
			require.NoError(t, err)
			assert.True(t, bytes.Contains(info, []byte(tc.problem)), "the ErrorInfo names %s", tc.problem)
			assert.True(t, bytes.Contains(info, []byte("operationState")) && bytes.Contains(info, []byte(tc.state)),
				"the ErrorInfo says the operation is %s", tc.state)
			assert.Equal(t, tc.retry, w.Header().Get("Retry-After"))
			assert.Equal(t, tc.state, w.Header().Get("Idempotency-Operation-State"))
		})
	}
}

// completed is a memory store that holds a completed operation under
// testKey.
func completed(t *testing.T) server.Store {
	store := server.NewMemoryStore()
	require.Equal(t, http.StatusOK, serveConnect(store, server.Config{}, testKey, nil).Code)
	return store
}

// serveConnect serves one Connect unary request with key ("" for none)
// and header through the middleware over store with cfg.
func serveConnect(store server.Store, cfg server.Config, key string, header http.Header) *httptest.ResponseRecorder {
	cfg.Logger = slog.New(slog.DiscardHandler)
	mw := server.Middleware(store, cfg)
	mux := http.NewServeMux()
	mux.Handle("POST /pay.v1.Payments/Pay", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"payment":"p1"}`)
	})))
	r := httptest.NewRequest(http.MethodPost, "/pay.v1.Payments/Pay", strings.NewReader(`{"amount":5}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Connect-Protocol-Version", "1")
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	for k, vs := range header {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	return w
}

const testKey = "8e4c1b2a-5d1f-4f3e-9a7b-2c6d0e1f3a4b"

// failingComplete is a memory store whose attempts fail to complete with
// err.
func failingComplete(err error) server.Store {
	return &attemptStore{MemoryStore: server.NewMemoryStore(), complete: err}
}

// failingClaim is a memory store whose claims fail with err.
func failingClaim(err error) server.Store {
	return &attemptStore{MemoryStore: server.NewMemoryStore(), claim: err}
}

type attemptStore struct {
	*server.MemoryStore
	claim, complete error
}

func (s *attemptStore) Claim(ctx context.Context, c *server.Claim) (server.ClaimResult, error) {
	if s.claim != nil {
		return server.ClaimResult{}, s.claim
	}
	res, err := s.MemoryStore.Claim(ctx, c)
	if err == nil && res.Attempt != nil {
		res.Attempt = failingAttempt{Attempt: res.Attempt, err: s.complete}
	}
	return res, err
}

// failingAttempt is an attempt whose Complete aborts it and fails.
type failingAttempt struct {
	server.Attempt
	err error
}

func (a failingAttempt) Complete(ctx context.Context, _ *server.Response) error {
	_ = a.Abort(ctx, false)
	return a.err
}
