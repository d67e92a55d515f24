package testserver

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// Config configures a [Server]. The zero Config listens on 127.0.0.1 on a
// free port, applies no faults, uses seed 0 and keeps every event.
type Config struct {
	// Addr is the loopback address to listen on. Empty means
	// "127.0.0.1:0" (a free port). Only loopback hosts (127.0.0.0/8, ::1,
	// localhost) are accepted: a fault injector must not face a network.
	Addr string
	// Seed seeds the Mix rules. Zero is a seed like any other; Seed (the
	// function) picks one per test and prints it when the test fails.
	Seed uint64
	// Rules are the initial rules; SetRules replaces them. Nil applies no
	// fault.
	Rules []Rule
	// KeyHeader names the request header that carries the idempotency key,
	// the operation id of a keyed request, for a client and server that
	// use another than the draft's (X-Idempotency-Key, PayPal-Request-Id).
	// Empty means "Idempotency-Key".
	KeyHeader string
	// OperationHeader, when set, names the request header that carries
	// the operation id of requests without an Idempotency-Key (for example
	// "X-Operation-Id" on a naive client's requests). Empty means that
	// such requests have no operation id: each is its own operation, at
	// attempt 1.
	OperationHeader string
	// FaultHeader, when set, names a request header whose value (in the
	// [ParseFault] syntax) forces that fault on the request, before any
	// rule; the header is removed before the handler sees the request. A
	// malformed value is answered 400 without running the handler. Empty
	// (the default) disables the header.
	FaultHeader string
	// HoldTimeout bounds how long [FaultHold] waits for a retry; when none
	// arrives, the held request goes on alone. Zero means 10s.
	HoldTimeout time.Duration
	// MaxEvents bounds the events kept in memory (the latest are kept).
	// Zero keeps them all, right for tests; set it for long-running
	// proxies, and count from OnEvent ([Summary.Add]) what must cover the
	// whole run. Besides the events, the only memory that grows with the
	// traffic is the attempt counter: one entry per operation id seen in
	// the last hour (see [Event.Attempt]).
	MaxEvents int
	// OnEvent, when set, is called with every event as it is logged, from
	// the request's goroutine; it must be safe for concurrent use and
	// quick.
	OnEvent func(Event)
}

// Defaults of [Config], as its fields' docs state them.
const (
	defaultAddr        = "127.0.0.1:0"
	defaultHoldTimeout = 10 * time.Second
)

// withDefaults is c with its empty and zero fields resolved, once, by
// start.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = defaultAddr
	}
	if c.KeyHeader == "" {
		c.KeyHeader = wire.HeaderKey
	}
	if c.HoldTimeout == 0 {
		c.HoldTimeout = defaultHoldTimeout
	}
	return c
}

// ErrNotLoopback is returned for a [Config.Addr] whose host is not a loopback
// address.
var ErrNotLoopback = errors.New("testserver: listen address is not loopback")

// listen opens the configured loopback listener (c resolved).
func (c Config) listen() (net.Listener, error) {
	addr := c.Addr
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("testserver: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%w: %q", ErrNotLoopback, addr)
	}
	return net.Listen("tcp", addr)
}

// validate checks the parts of c that [New] cannot repair.
func (c Config) validate() error {
	if c.MaxEvents < 0 || c.HoldTimeout < 0 {
		return errors.New("testserver: MaxEvents or HoldTimeout is negative")
	}
	for _, h := range []string{c.KeyHeader, c.OperationHeader, c.FaultHeader} {
		if h != "" && !wire.ValidHeaderName(h) {
			return fmt.Errorf("testserver: %q is not a valid header name", h)
		}
	}
	return ValidateRules(c.Rules)
}
