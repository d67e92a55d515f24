package testserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// before applies x's fault if it acts before the handler. It returns
// true when the handler is to run.
func (s *Server) before(w http.ResponseWriter, x *exchange) bool {
	row, _ := rowOf(x.fault.Kind)
	if row.before == nil {
		return true
	}
	return row.before(s, w, x)
}

// statusBefore answers the fault's status without running the handler.
func (s *Server) statusBefore(w http.ResponseWriter, x *exchange) bool {
	x.ev.Status = s.writeStatus(w, x.fault)
	return false
}

// abort ends a request that a fault gave up on (its client left, or the
// server is closing) by closing the connection, so that net/http does not
// send an empty 200 in its name. It returns false, for before's callers.
func (s *Server) abort(w http.ResponseWriter, x *exchange) bool {
	c, _, err := s.hijack(w)
	if err == nil {
		s.release(c)
	}
	return false
}

// writeStatus answers f's status with its Retry-After and a short text
// body, and returns the status.
func (s *Server) writeStatus(w http.ResponseWriter, f Fault) int {
	status := f.status()
	if f.RetryAfter > 0 {
		w.Header().Set(wire.HeaderRetryAfter, s.retryAfter(f))
	}
	body := fmt.Sprintf("testserver: injected %d %s\n", status, http.StatusText(status))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
	return status
}

// retryAfter renders f.RetryAfter as delta-seconds or as an HTTP-date.
func (s *Server) retryAfter(f Fault) string {
	if f.RetryAfterDate {
		// An HTTP-date has whole seconds: round up so the wait is never
		// shorter than asked.
		at := s.clock.Now().Add(f.RetryAfter + time.Second - 1).UTC().Truncate(time.Second)
		return at.Format(http.TimeFormat)
	}
	return wire.FormatRetryAfter(f.RetryAfter)
}

// delayRequest reads the body (so that net/http notices a client that
// leaves), then waits the fault's delay. It returns false when the client
// left or the server closed first: the handler must not run for a request
// nobody waits for, or the fault would not be a "before" one.
func (s *Server) delayRequest(x *exchange) bool {
	d := x.fault.Delay
	if err := s.bufferBody(x, Fault{Kind: FaultDelay, Bytes: 1 << 16}); err != nil {
		return false
	}
	if err := s.sleep(x.r.Context(), d); err != nil {
		x.ev.Err = "delay: client left or server closed: " + err.Error()
		return false
	}
	return true
}

// slowRead reads the body f.Bytes at a time with f.Delay before each read
// (f is the fault), then pauses once more before it hands the handler the
// bytes read. A
// client that left while its (already sent) body was being read is noticed
// by net/http as soon as the body is consumed, and that last pause is what
// lets the fault see it and skip the handler.
func (s *Server) slowRead(x *exchange) bool {
	f := x.fault
	if err := s.bufferBody(x, f); err != nil {
		return false
	}
	if err := s.sleep(x.r.Context(), f.Delay); err != nil {
		x.ev.Err = "slow-read: client left or server closed: " + err.Error()
		return false
	}
	return true
}

// bufferBody reads the whole request body in chunks of f.chunk() bytes,
// sleeping f.Delay before each, and replaces the body with the bytes read.
// An error is noted in the event under f.Kind's name.
func (s *Server) bufferBody(x *exchange, f Fault) error {
	r := x.r
	var buf bytes.Buffer
	chunk := make([]byte, f.chunk())
	for {
		if err := s.sleep(r.Context(), f.Delay); err != nil {
			x.ev.Err = string(f.Kind) + ": client left or server closed: " + err.Error()
			return err
		}
		n, err := r.Body.Read(chunk)
		buf.Write(chunk[:n])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			x.ev.Err = "reading the request body: " + err.Error()
			return err
		}
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(&buf)
	return nil
}

// sleep waits d on the server's clock; it returns ctx's error when ctx
// ends first (every request context ends when the server closes).
func (s *Server) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	c, stop := s.clock.NewTimer(d)
	defer stop()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
