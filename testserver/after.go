package testserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// maxDrain bounds the request body the after-handler faults read.
const maxDrain = 1 << 20

// after sends, spoils or withholds the handler's buffered response
// according to x.fault, an after-handler kind. It first reads what the
// handler left of the request body (up to maxDrain): net/http notices a
// client that leaves (and cancels the request's context, which ends a
// delay) only once the body is read, and unread bytes would turn a raw
// cut's FIN into an RST.
func (s *Server) after(w http.ResponseWriter, x *exchange, rec *recorder) {
	_, _ = io.CopyN(io.Discard, x.r.Body, maxDrain)
	x.ev.HandlerStatus = rec.statusCode()
	row, _ := rowOf(x.fault.Kind)
	row.after(s, w, x, rec)
}

// delayResponse sends the buffered response the fault's delay later,
// unless the client leaves or the server closes first.
func (s *Server) delayResponse(w http.ResponseWriter, x *exchange, rec *recorder) {
	if err := s.sleep(x.r.Context(), x.fault.Delay); err != nil {
		x.ev.Err = "delay-response: client left or server closed: " + err.Error()
		s.abort(w, x)
		return
	}
	s.sendRecorded(w, x, rec)
}

// statusAfter discards the buffered response and answers the fault's
// status instead.
func (s *Server) statusAfter(w http.ResponseWriter, x *exchange, _ *recorder) {
	x.ev.Status = s.writeStatus(w, x.fault)
}

// sendRecorded sends the buffered response as the handler wrote it.
func (s *Server) sendRecorded(w http.ResponseWriter, x *exchange, rec *recorder) {
	rec.copyHeader(w)
	w.WriteHeader(rec.statusCode())
	n, _ := w.Write(rec.body.Bytes())
	x.ev.Status, x.ev.BodyBytes = rec.statusCode(), int64(n)
}

// partialBody takes the connection over and sends the response's head
// and part of its body, then closes.
func (s *Server) partialBody(w http.ResponseWriter, x *exchange, rec *recorder) {
	s.takeOver(w, x, func(c net.Conn, brw *bufio.ReadWriter) { s.writePartial(c, brw, x, rec) })
}

// writePartial writes the head with the full Content-Length and the first
// f.Bytes of the body (default half, at most all but the last byte), then
// closes with a FIN. On an empty body it cuts the status line in half
// instead.
func (s *Server) writePartial(c net.Conn, brw *bufio.ReadWriter, x *exchange, rec *recorder) {
	head, body := rec.head(), rec.body.Bytes()
	n := x.fault.Bytes
	switch {
	case n == 0:
		n = len(body) / 2
	case n >= len(body):
		n = max(0, len(body)-1)
	}
	out := append(head, body[:n]...)
	if len(body) == 0 {
		out = head[:len("HTTP/1.1 ")]
	} else {
		x.ev.Status = rec.statusCode()
	}
	written, err := c.Write(out)
	if len(body) > 0 {
		x.ev.BodyBytes = int64(max(0, written-len(head)))
	}
	if err != nil {
		x.ev.Err = "partial-body: " + err.Error()
	}
	s.finConn(c, brw)
}

// slowBody sends the buffered response with its status and headers at
// once, then the body f.Bytes at a time with f.Delay before each chunk.
func (s *Server) slowBody(w http.ResponseWriter, x *exchange, rec *recorder) {
	rec.copyHeader(w)
	w.WriteHeader(rec.statusCode())
	x.ev.Status = rec.statusCode()
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	body, chunk := rec.body.Bytes(), x.fault.chunk()
	for len(body) > 0 {
		if err := s.sleep(x.r.Context(), x.fault.Delay); err != nil {
			x.ev.Err = "slow-body: client left or server closed: " + err.Error()
			s.abort(w, x)
			return
		}
		n, err := w.Write(body[:min(chunk, len(body))])
		x.ev.BodyBytes += int64(n)
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			x.ev.Err = "slow-body: " + err.Error()
			return
		}
		body = body[n:]
	}
}
