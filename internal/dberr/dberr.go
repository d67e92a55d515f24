// Package dberr classifies the errors of a database connection: whether an
// error says that the database could not be reached, or was lost, rather
// than that it refused what was asked. The idempotency middleware (package
// server) and the payments example answer the first kind with 503 and
// Retry-After, as a failover or a restart of the database ends it.
package dberr

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unreachable reports whether err says that the database could not be
// reached, or was lost, or cannot take writes now: a failed connection
// attempt, a connection that broke or closed, or a server that shuts down,
// is starting, is out of connections or is a standby in recovery (SQLSTATE
// class 08, 57P01 to 57P03, 53300, 25006). Such an error ends when the
// database (or the failover) is back, so a client should retry. A
// deadline that passed counts (context.DeadlineExceeded is a net.Error
// that times out): the database did not answer in time. A cancellation
// does not: it is the caller's, not the database's. database/sql's
// driver.ErrBadConn counts: a driver returns it for a connection that broke
// (pgx's stdlib driver, for one whose connection pgx found closed).
func Unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "53300", "25006":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
