package idem

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReadAhead(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		length   int64
		limit    int64
		wantBuf  string
		wantErr  error
		wantRead string // what the caller reads after readAhead
	}{
		{"declared, fits", "hello", 5, 100, "hello", nil, "hello"},
		{"unknown length", "hello", -1, 100, "hello", nil, "hello"},
		{"zero declared but data", "hello", 0, 100, "hello", nil, "hello"},
		{"longer than declared", "hello world", 5, 100, "hello world", nil, "hello world"},
		{"cut short", "hel", 5, 100, "hel", io.ErrUnexpectedEOF, ""},
		{"empty where data declared", "", 5, 100, "", io.ErrUnexpectedEOF, ""},
		{"over the limit streams the rest", "0123456789", 10, 4, "0123", nil, "0123456789"},
		{"empty", "", 0, 100, "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{ContentLength: tt.length, Body: io.NopCloser(strings.NewReader(tt.body))}
			if tt.wantErr != nil {
				resp.Body = io.NopCloser(io.MultiReader(strings.NewReader(tt.body), errReader{tt.wantErr}))
			}
			done := 0
			buf, err := readAhead(resp, tt.limit, func() { done++ })
			assert.Equal(t, tt.wantBuf, string(buf))
			assert.ErrorIs(t, err, tt.wantErr)
			if err != nil {
				assert.Equal(t, 1, done, "a failed read ends the attempt")
				return
			}
			got, _ := io.ReadAll(resp.Body)
			assert.Equal(t, tt.wantRead, string(got))
			resp.Body.Close()
			assert.Equal(t, 1, done, "the attempt ends once")
		})
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
