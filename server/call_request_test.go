package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type callCtxKey struct{}

// callRequest gives what http.NewRequestWithContext gives for a method's
// full name, in every field the server's core reads.
func TestCallRequestAsNewRequestWithContext(t *testing.T) {
	ctx := context.WithValue(context.Background(), callCtxKey{}, "v")
	const route = "/idem.sample.Payments/Pay"
	body := []byte("\x0a\x03abc")
	got := callRequest(ctx, route, http.Header{"Idempotency-Key": {"k"}}, body)
	want, err := http.NewRequestWithContext(ctx, http.MethodPost, route, bytes.NewReader(body))
	require.NoError(t, err)
	assert.Equal(t, want.Method, got.Method)
	assert.Equal(t, *want.URL, *got.URL)
	assert.Equal(t, want.URL.RequestURI(), got.URL.RequestURI())
	assert.Equal(t, want.URL.EscapedPath(), got.URL.EscapedPath())
	assert.Equal(t, want.Host, got.Host)
	assert.Equal(t, want.RequestURI, got.RequestURI)
	assert.Equal(t, []any{want.Proto, want.ProtoMajor, want.ProtoMinor}, []any{got.Proto, got.ProtoMajor, got.ProtoMinor})
	assert.Equal(t, want.ContentLength, got.ContentLength)
	assert.Equal(t, "v", got.Context().Value(callCtxKey{}))
	assert.Equal(t, []string{"k"}, got.Header.Values("Idempotency-Key"))
	b, err := io.ReadAll(got.Body)
	require.NoError(t, err)
	assert.Equal(t, body, b)
}
