package outbox

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

func validMessage() Message {
	return Message{Name: "payment.created", Method: "POST", URL: "http://127.0.0.1:9/hook",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`)}
}

func TestMessageValidation(t *testing.T) {
	tests := []struct {
		name string
		edit func(m *Message)
		want string // in the error; "" for a valid message
	}{
		{"valid", func(*Message) {}, ""},
		{"valid, body at the limit", func(m *Message) { m.Body = make([]byte, maxBodyBytes) }, ""},
		{"empty method", func(m *Message) { m.Method = "" }, "Method"},
		{"method with a space", func(m *Message) { m.Method = "PO ST" }, "Method"},
		{"relative URL", func(m *Message) { m.URL = "/hook" }, "absolute"},
		{"ftp URL", func(m *Message) { m.URL = "ftp://127.0.0.1/x" }, "http or https"},
		{"URL without host", func(m *Message) { m.URL = "http:///x" }, "no host"},
		{"unparsable URL", func(m *Message) { m.URL = "http://[::1" }, "URL"},
		{"URL over 8 KiB", func(m *Message) { m.URL = "http://127.0.0.1/" + strings.Repeat("p", 8<<10) }, "URL is"},
		{"body over the limit", func(m *Message) { m.Body = make([]byte, maxBodyBytes+1) }, "Body is 262145 bytes, over the limit of 262144"},
		{"empty name", func(m *Message) { m.Name = "" }, "Name"},
		{"name with a space", func(m *Message) { m.Name = "payment created" }, "Name"},
		{"long name", func(m *Message) { m.Name = strings.Repeat("n", 129) }, "Name"},
		{"Idempotency-Key header", func(m *Message) { m.Header.Set("Idempotency-Key", "k") }, "Message.Key"},
		{"Content-Length header", func(m *Message) { m.Header.Set("content-length", "3") }, "Content-Length"},
		{"bad header name", func(m *Message) { m.Header["X Bad"] = []string{"v"} }, "not a token"},
		{"header value with CRLF", func(m *Message) { m.Header.Set("X-A", "a\r\nX-B: b") }, "control character"},
		{"valid, headers at the limits", func(m *Message) { m.Header = headers(maxHeaders, maxHeaderBytes) }, ""},
		{"header bytes over the limit", func(m *Message) { m.Header = headers(1, maxHeaderBytes+1) }, "bytes, over the limit of 16384"},
		{"a 20 MiB header value", func(m *Message) { m.Header.Set("X-Big", strings.Repeat("v", 20<<20)) }, "bytes, over the limit of 16384"},
		{"too many header values", func(m *Message) { m.Header = headers(maxHeaders+1, 0) }, "values, over the limit of 100"},
		{"100,000 headers", func(m *Message) { m.Header = headers(100_000, 0) }, "values, over the limit of 100"},
		{"valid, names without values at the limit", func(m *Message) { m.Header = emptyHeaders(maxHeaders) }, ""},
		{"100,000 header names without values", func(m *Message) { m.Header = emptyHeaders(100_000) }, "values, over the limit of 100"},
		{"header names without values over the bytes", func(m *Message) {
			m.Header = http.Header{strings.Repeat("X", maxHeaderBytes+1): nil}
		}, "bytes, over the limit of 16384"},
		{"many values of one header", func(m *Message) { m.Header = http.Header{"X-A": make([]string, maxHeaders+1)} }, "values, over the limit of 100"},
		{"key with a space", func(m *Message) { m.Key = "a b" }, "Key"},
		{"key too long", func(m *Message) { m.Key = strings.Repeat("k", 256) }, "Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validMessage()
			tt.edit(&m)
			_, err := prepare(context.Background(), m, wire.HeaderKey)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidMessage)
			require.Contains(t, err.Error(), tt.want)
			require.True(t, strings.HasPrefix(err.Error(), "outbox: "), "error %q lacks the package prefix", err)
		})
	}
}

// emptyHeaders returns n header names X-0 ... without values.
func emptyHeaders(n int) http.Header {
	h := make(http.Header, n)
	for i := range n {
		h["X-"+strconv.Itoa(i)] = nil
	}
	return h
}

// headers returns n headers X-0 ... whose names and values add up to
// size bytes (at least their names).
func headers(n, size int) http.Header {
	h := make(http.Header, n)
	used := 0
	for i := range n {
		name := "X-" + strconv.Itoa(i)
		h[name] = []string{""}
		used += len(name)
	}
	if used < size {
		h["X-0"] = []string{strings.Repeat("v", size-used)}
	}
	return h
}

func TestPrepareCopiesTheMessage(t *testing.T) {
	m := validMessage()
	got, err := prepare(context.Background(), m, wire.HeaderKey)
	require.NoError(t, err)
	m.Body[0], m.Header["Content-Type"][0] = 'X', "text/plain"
	require.Equal(t, `{"id":1}`, string(got.Body))
	require.Equal(t, "application/json", got.Header.Get("Content-Type"))
}

func TestDeriveKey(t *testing.T) {
	op := server.Operation{Tenant: "t", Principal: "p", Route: "POST /v1/payments", Key: "k1", Attempt: 1}
	k := DeriveKey(op, "payment.created")
	require.NoError(t, wire.ValidateKey(k))
	require.Len(t, k, 68)
	require.True(t, strings.HasPrefix(k, "ob1-"))

	again := op
	again.Attempt = 3 // a takeover derives the same key
	require.Equal(t, k, DeriveKey(again, "payment.created"))

	others := map[string]string{
		"name":      DeriveKey(op, "payment.settled"),
		"key":       DeriveKey(server.Operation{Tenant: "t", Principal: "p", Route: "POST /v1/payments", Key: "k2"}, "payment.created"),
		"tenant":    DeriveKey(server.Operation{Tenant: "u", Principal: "p", Route: "POST /v1/payments", Key: "k1"}, "payment.created"),
		"boundary":  DeriveKey(server.Operation{Tenant: "tp", Principal: "", Route: "POST /v1/payments", Key: "k1"}, "payment.created"),
		"principal": DeriveKey(server.Operation{Tenant: "t", Principal: "q", Route: "POST /v1/payments", Key: "k1"}, "payment.created"),
		"route":     DeriveKey(server.Operation{Tenant: "t", Principal: "p", Route: "POST /v1/charges", Key: "k1"}, "payment.created"),
	}
	for what, other := range others {
		require.NotEqual(t, k, other, "another %s derives the same key", what)
	}
	// The derivation is fixed: a change of it must change the version.
	require.Equal(t, "ob1-", k[:4])
	require.Equal(t, DeriveKey(op, "payment.created"), k)
}

func TestKeyFor(t *testing.T) {
	m := validMessage()
	a, b := keyFor(context.Background(), &m), keyFor(context.Background(), &m)
	require.NotEqual(t, a, b, "without an operation each enqueue draws a key")
	require.NoError(t, wire.ValidateKey(a))
	m.Key = "given"
	require.Equal(t, "given", keyFor(context.Background(), &m))
}

func TestSame(t *testing.T) {
	a := validMessage()
	a.Key = "k"
	b := a.clone()
	require.True(t, a.same(&b))
	b.Body = []byte(`{"id":2}`)
	require.False(t, a.same(&b))
	c := a.clone()
	c.Header.Add("X-A", "1")
	require.False(t, a.same(&c))
	require.False(t, errors.Is(nil, ErrKeyConflict))
}

// A message may not set the client's custom key header, whatever the case
// of its name in the map (a map literal is not canonicalised).
func TestPrepareRefusesTheKeyHeaderInAnyCase(t *testing.T) {
	for _, name := range []string{"X-Request-Key", "x-request-key", "X-REQUEST-KEY"} {
		m := validMessage()
		m.Header[name] = []string{"mine"}
		_, err := prepare(context.Background(), m, "X-Request-Key")
		require.ErrorIs(t, err, ErrInvalidMessage, "header %q", name)
	}
}
