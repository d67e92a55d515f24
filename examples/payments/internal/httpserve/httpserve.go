// Package httpserve runs the HTTP servers of the payments example programs
// until their context ends, then shuts them down gracefully.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Timeouts bound how long a client can hold a connection, and the
// goroutine that serves it, without getting on with its request. A zero
// field means its default.
type Timeouts struct {
	// Read bounds the reading of a whole request, header and body
	// (http.Server.ReadTimeout, counted from the first byte): a client
	// that sends its body slowly, or stops, is cut off. Default 15 s, which
	// the programs' largest body (64 KiB) needs only at under 5 KB/s.
	Read time.Duration
	// Write bounds the time from the end of a request's header to the end
	// of its response (http.Server.WriteTimeout): a client that does not
	// read its response is cut off. It does not stop a handler, so it must
	// exceed the longest one, or a slow answer is cut off after its work
	// was done. Default none.
	Write time.Duration
	// Idle bounds the wait for the next request on a kept-alive connection
	// (http.Server.IdleTimeout). Default 60 s, under the 90 s for which
	// net/http's clients keep an idle connection.
	Idle time.Duration
}

// readHeaderTimeout bounds the reading of a request's header.
const readHeaderTimeout = 10 * time.Second

func (t Timeouts) withDefaults() Timeouts {
	if t.Read <= 0 {
		t.Read = 15 * time.Second
	}
	if t.Idle <= 0 {
		t.Idle = 60 * time.Second
	}
	return t
}

// Run serves h on ln until ctx is done, then shuts the server down: it
// stops accepting connections, lets the requests in flight finish for at
// most grace, and returns nil after a clean shutdown. It returns the
// server's error if serving fails first, and an error when the requests in
// flight outlast grace (they are then cut off). The header of a request
// must arrive within 10 s; t bounds the rest.
func Run(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, t Timeouts, log *slog.Logger) error {
	t = t.withDefaults()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(readHeaderTimeout, t.Read),
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing the requests in flight", "grace", grace)
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := srv.Shutdown(stop)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("shut down")
	return nil
}
