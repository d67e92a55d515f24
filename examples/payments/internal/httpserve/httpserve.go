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

// Run serves h on ln until ctx is done, then shuts the server down: it
// stops accepting connections, lets the requests in flight finish for at
// most grace, and returns nil after a clean shutdown. It returns the
// server's error if serving fails first, and an error when the requests in
// flight outlast grace (they are then cut off).
func Run(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
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
