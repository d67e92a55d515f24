package rpcidem

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteResult(t *testing.T) {
	res := &Result{Status: []byte{1, 2}}
	w := NewRecorder(http.Header{})
	WriteResult(w, "application/x-test", http.StatusNotFound, res, nil)
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Equal(t, "application/x-test", w.Header().Get("Content-Type"))
	assert.Equal(t, res.Encode(), w.Body.Bytes())
	got, err := Decode(w.Body.Bytes())
	require.NoError(t, err)
	assert.Equal(t, res.Status, got.Status)
}

// An answer that could not be encoded is an empty 500, never stored.
func TestWriteResultUnencodable(t *testing.T) {
	w := NewRecorder(http.Header{})
	WriteResult(w, "application/x-test", http.StatusOK, &Result{}, errors.New("cannot marshal"))
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Zero(t, w.Body.Len())
}

// The first status written stays.
func TestRecorderKeepsFirstStatus(t *testing.T) {
	w := NewRecorder(http.Header{})
	_, _ = w.Write([]byte("a"))
	w.WriteHeader(http.StatusTeapot)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "a", w.Body.String())
}
