package httpserve

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/internal/testwait"
)

// A shutdown lets the request in flight finish, then Run returns nil. The
// handler is released only once the server's Shutdown has begun (net/http
// calls the RegisterOnShutdown functions from Shutdown, never from Close),
// so the request is really in flight during the shutdown.
func TestRunFinishesTheRequestsInFlight(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	arrived, ended := make(chan struct{}), make(chan struct{})
	defer close(ended) // a failed test's handler is not left waiting
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		shuttingDown := make(chan struct{})
		r.Context().Value(http.ServerContextKey).(*http.Server).RegisterOnShutdown(func() { close(shuttingDown) })
		close(arrived)
		select {
		case <-shuttingDown:
			_, _ = io.WriteString(w, "done")
		case <-ended:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, ln, h, 10*time.Second, Timeouts{}, slog.New(slog.DiscardHandler)) }()

	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			answer <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answer <- string(body)
	}()
	testwait.Recv(t, arrived, "the request")
	cancel()
	assert.Equal(t, "done", testwait.Recv(t, answer, "the answer"))
	assert.NoError(t, testwait.Recv(t, ran, "Run's return after the shutdown"))
}

// A request that outlasts the grace period is cut off, and Run says so.
func TestRunGivesUpAfterGrace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	arrived, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(arrived)
		<-release
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, ln, h, time.Millisecond, Timeouts{}, slog.New(slog.DiscardHandler)) }()
	go func() {
		if resp, err := http.Get("http://" + ln.Addr().String()); err == nil {
			resp.Body.Close()
		}
	}()
	testwait.Recv(t, arrived, "the request")
	cancel()
	assert.ErrorIs(t, testwait.Recv(t, ran, "Run's return after the shutdown"), context.DeadlineExceeded)
}
