package testserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// kindRow is one fault kind: what it does, and when. Exactly one of before
// and after is set.
type kindRow struct {
	kind FaultKind
	// before acts before the handler and reports whether the handler is
	// to run.
	before func(s *Server, w http.ResponseWriter, x *exchange) bool
	// after lets the handler run into a buffer, then sends, spoils or
	// withholds its response.
	after func(s *Server, w http.ResponseWriter, x *exchange, rec *recorder)
}

// kindTable is every fault kind that does something, in documentation
// order. A new kind is a constant in fault.go and a row here: [Kinds],
// [KindList], [FaultKind.AfterHandler], validation, the summary and the
// server's dispatch all read this table.
var kindTable = []kindRow{
	{kind: FaultStatus, before: (*Server).statusBefore},
	{kind: FaultReset, before: cutBefore(resetConn)},
	{kind: FaultClose, before: cutBefore((*Server).finConn)},
	{kind: FaultBlackhole, before: cutBefore((*Server).hangConn)},
	{kind: FaultDelay, before: orAbort((*Server).delayRequest)},
	{kind: FaultSlowRead, before: orAbort((*Server).slowRead)},
	{kind: FaultDropReset, after: cutAfter(resetConn)},
	{kind: FaultDropClose, after: cutAfter((*Server).finConn)},
	{kind: FaultDropHang, after: cutAfter((*Server).hangConn)},
	{kind: FaultDelayResponse, after: (*Server).delayResponse},
	{kind: FaultPartialBody, after: (*Server).partialBody},
	{kind: FaultSlowBody, after: (*Server).slowBody},
	{kind: FaultStatusAfter, after: (*Server).statusAfter},
	{kind: FaultHold, before: orAbort((*Server).holdRequest)},
}

// rowOf returns k's row; the zero row, which lets the request through
// untouched, for [FaultNone] and unknown kinds.
func rowOf(k FaultKind) (kindRow, bool) {
	for _, row := range kindTable {
		if row.kind == k {
			return row, true
		}
	}
	return kindRow{}, false
}

// connEnd ends a connection taken over from net/http; r reads what the
// client still sends.
type connEnd func(s *Server, c net.Conn, r io.Reader)

// resetConn is [Server.resetConn] as a connEnd.
func resetConn(s *Server, c net.Conn, _ io.Reader) { s.resetConn(c) }

// cutBefore is a fault that takes the connection over before the handler
// (without reading the request body) and ends it with end.
func cutBefore(end connEnd) func(*Server, http.ResponseWriter, *exchange) bool {
	return func(s *Server, w http.ResponseWriter, x *exchange) bool {
		s.takeOver(w, x, func(c net.Conn, brw *bufio.ReadWriter) { end(s, c, brw) })
		return false
	}
}

// cutAfter is a fault that runs the handler, discards its response, takes
// the connection over and ends it with end.
func cutAfter(end connEnd) func(*Server, http.ResponseWriter, *exchange, *recorder) {
	return func(s *Server, w http.ResponseWriter, x *exchange, _ *recorder) {
		s.takeOver(w, x, func(c net.Conn, brw *bufio.ReadWriter) { end(s, c, brw) })
	}
}

// orAbort is a fault that waits before the handler: when wait reports
// that the client left or the server closed, the connection is closed and
// the handler does not run.
func orAbort(wait func(s *Server, x *exchange) bool) func(*Server, http.ResponseWriter, *exchange) bool {
	return func(s *Server, w http.ResponseWriter, x *exchange) bool {
		return wait(s, x) || s.abort(w, x)
	}
}

// takeOver hijacks w's connection and hands it to use; a failure is noted
// in the event.
func (s *Server) takeOver(w http.ResponseWriter, x *exchange, use func(net.Conn, *bufio.ReadWriter)) {
	c, brw, err := s.hijack(w)
	if err != nil {
		x.ev.Err = err.Error()
		return
	}
	use(c, brw)
}
