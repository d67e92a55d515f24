package exampleserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Served is an HTTP server running on an address of its own.
type Served struct {
	// Addr is the address it listens on (the port chosen when the
	// address asked for port 0).
	Addr string
	// Stop shuts it down gracefully and waits for it.
	Stop func()
	// Err is why it stopped, read after Stop; nil after a shutdown.
	Err error
}

// Serve serves h on addr until Stop, which waits up to grace for the
// requests in flight. ctx's values reach the requests, not its end, so
// that a shutdown lets them finish. A request's header must arrive within
// 10 s and the whole request within 15 s; an idle connection is kept 60 s.
func Serve(ctx context.Context, addr string, h http.Handler, grace time.Duration) (*Served, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 15 * time.Second,
		IdleTimeout: 60 * time.Second, BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	s := &Served{Addr: ln.Addr().String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.Err = err
		}
	}()
	s.Stop = func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		_ = hs.Shutdown(sctx)
		<-done
	}
	return s, nil
}
