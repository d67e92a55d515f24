package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResponseRoundTrip(t *testing.T) {
	tests := map[string]Response{
		"created":      {Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`)},
		"no header":    {Status: 204, Header: http.Header{}},
		"multi-valued": {Status: 200, Header: http.Header{"X-Trace": {"first", "second", ""}, "Etag": {`"v1"`}}, Body: []byte("a")},
		"not UTF-8":    {Status: 201, Header: http.Header{"Location": {"/caf\xe9"}, "Etag": {"\"\xff\x00\""}}, Body: []byte("\x00\xff")},
		"large body":   {Status: 200, Header: http.Header{}, Body: bytes.Repeat([]byte{0xfe, 0, 'x'}, 1<<18)},
		"unavailable":  {Unavailable: true, Status: 200, Header: http.Header{}},
		"parked":       {Unavailable: true, Header: http.Header{}},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := want.MarshalBinary()
			require.NoError(t, err)
			var got Response
			require.NoError(t, got.UnmarshalBinary(b))
			assert.Equal(t, want, got)
			again, _ := (&Response{Unavailable: want.Unavailable, Status: want.Status, Header: want.Header.Clone(), Body: want.Body}).MarshalBinary()
			assert.Equal(t, b, again, "the form is deterministic")
			assert.Equal(t, len(b), cap(b), "MarshalBinary sizes its buffer exactly")
		})
	}
}

// UnmarshalBinary keeps nothing of its input: a store may reuse the buffer.
func TestResponseUnmarshalCopies(t *testing.T) {
	b, _ := (&Response{Status: 201, Header: http.Header{"X-Trace": {"a"}}, Body: []byte("body")}).MarshalBinary()
	var got Response
	require.NoError(t, got.UnmarshalBinary(b))
	for i := range b {
		b[i] = 0
	}
	assert.Equal(t, "body", string(got.Body))
	assert.Equal(t, "a", got.Header.Get("X-Trace"))
}

func TestResponseRefusesWhatItCannotReadWhole(t *testing.T) {
	good, _ := (&Response{Status: 201, Header: http.Header{"X-Trace": {"a", "bc"}}, Body: []byte("body")}).MarshalBinary()
	for n := range len(good) {
		assertRefused(t, good[:n], "cut to %d bytes", n)
	}
	block := encodeHeader(http.Header{})
	json := []byte(`{}`)
	var control Response
	require.NoError(t, control.UnmarshalBinary([]byte{responseFormat, 0, 200, 1, 1, block[0], 0}), "the form the cases below break")
	assert.Equal(t, Response{Status: 200, Header: http.Header{}}, control)
	for name, b := range map[string][]byte{
		"trailing byte":           append(bytes.Clone(good), 0),
		"unknown version":         append([]byte{3}, good[1:]...),
		"the header block alone":  block,
		"unknown flag":            {responseFormat, 2, 200, 1, 1, block[0], 0},
		"status over 999":         {responseFormat, 0, 0xe8, 0x07, 1, block[0], 0},
		"a JSON header part":      append(append([]byte{responseFormat, 0, 200, 1, byte(len(json))}, json...), 0),
		"a header length too big": {responseFormat, 0, 200, 1, 9, block[0], 0},
		"a body length too big":   {responseFormat, 0, 200, 1, 1, block[0], 5, 'a'},
	} {
		assertRefused(t, b, name)
	}
}

func assertRefused(t *testing.T, b []byte, msg string, args ...any) {
	t.Helper()
	r := Response{Status: 1}
	err := r.UnmarshalBinary(b)
	assert.ErrorIs(t, err, errStoredResponse, append([]any{msg}, args...)...)
	assert.Equal(t, Response{Status: 1}, r, append([]any{"a refused form leaves the response unchanged: " + msg}, args...)...)
}

// BenchmarkResponseMarshal is the cost of the stored form on a store's
// Complete, for a 1 KiB JSON response with the allowlisted headers.
//
//	go test -run '^$' -bench 'BenchmarkResponse' -benchmem ./server
func BenchmarkResponseMarshal(b *testing.B) {
	res := benchResponse()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = res.MarshalBinary()
	}
}

// BenchmarkResponseUnmarshal is the cost of reading it back on a replay.
func BenchmarkResponseUnmarshal(b *testing.B) {
	stored, _ := benchResponse().MarshalBinary()
	b.ReportAllocs()
	for b.Loop() {
		var r Response
		_ = r.UnmarshalBinary(stored)
	}
}

func benchResponse() *Response {
	return &Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"},
		"Location": {"/v1/payments/123"}, "X-Trace": {"first", "second"}}, Body: bytes.Repeat([]byte("x"), 1024)}
}

// A node of an earlier version refuses a record of the stored form rather
// than replay it without its headers and body: PostgresStore's earlier
// reader of the headers column (decodeHeader, kept for the records it
// wrote) and idemredis's (JSON) both fail on it.
func TestEarlierReadersRefuseTheStoredForm(t *testing.T) {
	b, _ := (&Response{Status: 201, Header: http.Header{"X-Trace": {"a"}}, Body: []byte(`{"id":1}`)}).MarshalBinary()
	_, err := decodeHeader(b)
	assert.ErrorIs(t, err, errStoredHeader)
	var h http.Header
	assert.Error(t, json.Unmarshal(b, &h))
}
