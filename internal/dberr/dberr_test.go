package dberr

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestUnreachable(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"EOF", fmt.Errorf("api: pay: %w", io.ErrUnexpectedEOF), true},
		{"conn closed", fmt.Errorf("api: pay: %w", pgconn.ErrConnClosed), true},
		{"database/sql's bad connection", fmt.Errorf("server: commit: %w", driver.ErrBadConn), true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"read-only standby", &pgconn.PgError{Code: "25006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, false},
		{"a bug", errors.New("api: something else"), false},
		{"the request's end", context.Canceled, false},
		{"a deadline", fmt.Errorf("timeout: %w", context.DeadlineExceeded), true},
	}
	for _, c := range cases {
		if got := Unreachable(c.err); got != c.want {
			t.Errorf("Unreachable(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}
