package grpcidem

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// heldStream is the grpc.ServerTransportStream a claimed handler sees: it
// holds the header and trailer metadata the handler sets (SendHeader
// included) until the outcome is settled, so that they can be stored with
// it and nothing leaves before it is durable.
type heldStream struct {
	method string

	mu      sync.Mutex
	header  metadata.MD
	trailer metadata.MD
}

// Method is the call's full method name.
func (s *heldStream) Method() string { return s.method }

// SetHeader adds md to the header metadata.
func (s *heldStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = metadata.Join(s.header, md)
	return nil
}

// SendHeader adds md to the header metadata, which is sent with the
// answer.
func (s *heldStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }

// SetTrailer adds md to the trailer metadata.
func (s *heldStream) SetTrailer(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = metadata.Join(s.trailer, md)
	return nil
}

// held returns the metadata set so far.
func (s *heldStream) held() (header, trailer metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header, s.trailer
}

// send sets header and trailer on the call of ctx. A call without a
// transport stream (an interceptor called directly) sends nothing.
func send(ctx context.Context, header, trailer metadata.MD) error {
	if grpc.ServerTransportStreamFromContext(ctx) == nil {
		return nil
	}
	if len(header) > 0 {
		if err := grpc.SetHeader(ctx, header); err != nil {
			return err
		}
	}
	if len(trailer) > 0 {
		return grpc.SetTrailer(ctx, trailer)
	}
	return nil
}
