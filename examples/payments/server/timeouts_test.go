package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// guard bounds each wait of these tests: far longer than the timeouts
// they set, so that only a server that never cuts the client off reaches it.
const guard = 20 * time.Second

// runServer runs the program in memory with args and returns its address;
// it stops when the test ends.
func runServer(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), stdout, io.Discard, func(string) string { return "" })
		_ = stdout.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(guard):
			t.Error("the server did not stop")
		}
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case line := <-lines:
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "payments server: listening on http://")
		require.True(t, ok, "first line %q", line)
		return addr
	case <-time.After(guard):
		t.Fatal("the server did not listen")
		return ""
	}
}

// readToEnd reads conn until the server closes it, at most guard, and
// returns what it read; it fails the test when the server kept it open.
func readToEnd(t *testing.T, conn net.Conn, r io.Reader) string {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(guard)))
	data, err := io.ReadAll(r)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v; it sent %q", guard, data)
	}
	return string(data)
}

// A client that sends a request's header and then its body slowly (here:
// part of it, then nothing) is cut off after -read-timeout: it does not
// hold a connection and a goroutine for as long as it likes.
func TestSlowBodyIsCutOff(t *testing.T) {
	addr := runServer(t, "-read-timeout", "300ms")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "POST /v1/payments HTTP/1.1\r\nHost: payments\r\n"+
		"Authorization: Bearer acme:alice\r\nIdempotency-Key: 0b5e5c9e-3f3d-4c1e-9d6f-5a3b2c1d0e9f\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"account_id\":")
	require.NoError(t, err)
	answer := readToEnd(t, conn, conn)
	assert.NotContains(t, answer, "201 Created", "a request whose body never arrived")
}

// A kept-alive connection that sends no further request is closed after
// -idle-timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	addr := runServer(t, "-idle-timeout", "300ms")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET /v1/accounts/acc-1 HTTP/1.1\r\nHost: payments\r\nAuthorization: Bearer acme:alice\r\n\r\n")
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.False(t, resp.Close, "the server keeps the connection alive")
	assert.Empty(t, readToEnd(t, conn, r), "nothing after the response")
}
