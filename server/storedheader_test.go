package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStoredHeaderRoundTrip(t *testing.T) {
	tests := map[string]http.Header{
		"none":         {},
		"multi-valued": {"X-Trace": {"first", "second", ""}, "Content-Type": {"application/json"}},
		"not UTF-8":    {"Location": {"/caf\xe9"}, "Etag": {"\"\xff\x00\""}},
		"long value":   {"Cache-Control": {string(make([]byte, 300))}},
	}
	for name, h := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := decodeHeader(encodeHeader(h))
			require.NoError(t, err)
			assert.Equal(t, h, got)
			assert.Equal(t, encodeHeader(h), encodeHeader(h.Clone()), "the encoding is deterministic")
		})
	}
	got, err := decodeHeader(nil)
	assert.NoError(t, err)
	assert.Empty(t, got, "NULL is no header")
}

func TestStoredHeaderRejectsCorruptBlocks(t *testing.T) {
	want := http.Header{"X-Trace": {"a", "bc"}, "Location": {"/x"}}
	block := encodeHeader(want)
	for n := range len(block) {
		// Never panics; a cut between two names leaves the names before it.
		got, err := decodeHeader(block[:n])
		if err == nil {
			for name, values := range got {
				assert.Equal(t, want[name], values, "decodeHeader(block[:%d])", n)
			}
		}
	}
	for _, bad := range [][]byte{block[:len(block)-1], {2}, {headerFormat, 0xff}, []byte(`{"X-Trace": "a"}`), []byte(`{"X`), {headerFormat, 1, 'A', 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		_, err := decodeHeader(bad)
		assert.ErrorIs(t, err, errStoredHeader, "decodeHeader(%q)", bad)
	}
}

// Headers stored by a version that kept them as jsonb, as Migrate converts
// them (the JSON's text), still decode.
func TestStoredHeaderReadsTheJSONOfOlderVersions(t *testing.T) {
	got, err := decodeHeader([]byte(`{"X-Trace": ["a", "b"], "Content-Type": ["application/json"]}`))
	require.NoError(t, err)
	assert.Equal(t, http.Header{"X-Trace": {"a", "b"}, "Content-Type": {"application/json"}}, got)
}
