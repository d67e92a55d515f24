package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// brokenBackend fails every Account with an error that names a secret, as
// a pgx connection error names its connection string.
type brokenBackend struct{ *MemoryBackend }

const secret = "password=hunter2"

func (brokenBackend) Account(context.Context, string, string) (Account, error) {
	return Account{}, fmt.Errorf("api: account: %w", errors.New(`failed to connect to "host=db.internal user=payments `+secret+`"`))
}

// A 500 logs its error and sends a generic detail: the error may name
// internals.
func TestInternalErrorIsLoggedNotSent(t *testing.T) {
	var log bytes.Buffer
	h := New(Config{Backend: brokenBackend{NewMemoryBackend()}, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	rec := do(t, h, call{method: "GET", path: "/v1/accounts/acc-1"})
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	assert.Equal(t, "internal", problemName(rec))
	assert.NotContains(t, rec.Body.String(), secret, "the response body")
	assert.Contains(t, log.String(), secret, "the log")
}
