package main

import (
	"context"
	"sync"
	"time"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/testserver"
)

// slowBackend is a Backend whose payments take about latency each, as a
// store on a loaded machine does: the -store-latency flag. Each payment
// call waits latency times a factor in [0.8, 1.2) drawn from the seed, the
// payment's reference and how many calls for it came before, so that every
// client meets the same latencies.
type slowBackend struct {
	api.Backend
	latency time.Duration
	seed    uint64

	mu    sync.Mutex
	calls map[string]uint64 // per payment reference
}

func newSlowBackend(b api.Backend, latency time.Duration, seed uint64) *slowBackend {
	return &slowBackend{Backend: b, latency: latency, seed: seed, calls: map[string]uint64{}}
}

// Pay waits for the payment's latency (or ctx), then pays.
func (s *slowBackend) Pay(ctx context.Context, p api.Payment) (api.Payment, error) {
	s.mu.Lock()
	n := s.calls[p.Reference]
	s.calls[p.Reference] = n + 1
	s.mu.Unlock()
	u := testserver.Draw(s.seed, "store-latency", p.Reference, int(n))
	timer := time.NewTimer(time.Duration(float64(s.latency) * (0.8 + 0.4*u)))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return api.Payment{}, ctx.Err()
	}
	return s.Backend.Pay(ctx, p)
}
