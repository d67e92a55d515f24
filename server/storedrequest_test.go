package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStoredRequestRoundTrip(t *testing.T) {
	mux := http.NewServeMux()
	var stored []byte
	mux.HandleFunc("POST /v1/{acct}/files/{path...}", func(_ http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		stored = encodeRequest(r, []string{"x-api-version"}, body)
	})
	r := httptest.NewRequest(http.MethodPost, "/v1/a%2F1/files/x/y.txt?v=1&w=%20", strings.NewReader("\x00body\xff"))
	r.Header.Set("Content-Type", "application/octet-stream")
	r.Header.Add("X-Api-Version", "7")
	r.Header.Add("X-Api-Version", "8")
	r.Header.Set("Authorization", "Bearer secret")
	r.Header.Set("Cookie", "session=secret")
	mux.ServeHTTP(httptest.NewRecorder(), r)
	require.NotNil(t, stored)

	got, err := decodeRequest(context.Background(), stored)
	require.NoError(t, err)
	assert.Equal(t, http.MethodPost, got.Method)
	assert.Equal(t, "/v1/a%2F1/files/x/y.txt?v=1&w=%20", got.URL.RequestURI())
	assert.Equal(t, "POST /v1/{acct}/files/{path...}", got.Pattern)
	assert.Equal(t, "a/1", got.PathValue("acct"))
	assert.Equal(t, "x/y.txt", got.PathValue("path"))
	assert.Equal(t, http.Header{"Content-Type": {"application/octet-stream"}, "X-Api-Version": {"7", "8"}}, got.Header,
		"never credentials or cookies")
	body, err := io.ReadAll(got.Body)
	require.NoError(t, err)
	assert.Equal(t, "\x00body\xff", string(body))
}

func TestStoredRequestRefusesCorruptData(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader("{}"))
	good := encodeRequest(r, nil, []byte("{}"))
	for name, b := range map[string][]byte{
		"empty":          nil,
		"unknown format": append([]byte{9}, good[1:]...),
		"cut in a field": good[:4],
		"huge count":     {requestFormat, 4, 'P', 'O', 'S', 'T', 1, '/', 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		_, err := decodeRequest(context.Background(), b)
		assert.ErrorIs(t, err, errStoredRequest, name)
	}
}
