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

// A shutdown lets the request in flight finish, then Run returns nil.
func TestRunFinishesTheRequestsInFlight(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	arrived, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(arrived)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, ln, h, 10*time.Second, slog.New(slog.DiscardHandler)) }()

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
	close(release)
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
	go func() { ran <- Run(ctx, ln, h, time.Millisecond, slog.New(slog.DiscardHandler)) }()
	go func() {
		if resp, err := http.Get("http://" + ln.Addr().String()); err == nil {
			resp.Body.Close()
		}
	}()
	testwait.Recv(t, arrived, "the request")
	cancel()
	assert.ErrorIs(t, testwait.Recv(t, ran, "Run's return after the shutdown"), context.DeadlineExceeded)
}
