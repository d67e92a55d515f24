package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A commit that fails because the store was lost (as in a failover) is
// answered 503 with Retry-After 1, one that the store refused 500; both
// are commit-failed, since the outcome is unknown.
func TestCommitFailedAnswers503WhenTheStoreWasLost(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		status     int
		retryAfter int64
	}{
		{"connection broke", fmt.Errorf("server: complete: %w", io.ErrUnexpectedEOF), http.StatusServiceUnavailable, 1},
		{"backend terminated", &pgconn.PgError{Code: "57P01"}, http.StatusServiceUnavailable, 1},
		{"now a standby", &pgconn.PgError{Code: "25006"}, http.StatusServiceUnavailable, 1},
		{"commit outlasted its bound", fmt.Errorf("server: complete: %w", context.DeadlineExceeded), http.StatusServiceUnavailable, 1},
		{"deferred constraint", &pgconn.PgError{Code: "23505"}, http.StatusInternalServerError, 0},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, http.StatusInternalServerError, 0},
		{"the handler ended the transaction", ErrTxEnded, http.StatusInternalServerError, 0},
		{"anything else", errors.New("server: complete: boom"), http.StatusInternalServerError, 0},
	}
	for _, c := range cases {
		p := commitFailed(c.err)
		if p.status != c.status || p.retryAfter != c.retryAfter || p.name != problemCommitFailed {
			t.Errorf("commitFailed(%s) = %d %s Retry-After %d, want %d %s Retry-After %d",
				c.name, p.status, p.name, p.retryAfter, c.status, problemCommitFailed, c.retryAfter)
		}
	}
}
