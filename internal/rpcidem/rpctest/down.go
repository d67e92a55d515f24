package rpctest

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// DownTarget is a loopback address nothing listens on (yet), for tests of
// a client that waits for its target: Dial connects to it for real and
// reports each refusal on Refused, and FastRetries may record the key of
// each attempt in Keys under Mu.
type DownTarget struct {
	Addr    string
	Refused chan struct{} // a dial was refused (buffered: the first is kept)
	Keys    []string      // the key of each attempt the client made
	Mu      sync.Mutex
}

// NewDownTarget is a DownTarget on a loopback port that was free.
func NewDownTarget(t *testing.T) *DownTarget {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	d := &DownTarget{Addr: lis.Addr().String(), Refused: make(chan struct{}, 1)}
	require.NoError(t, lis.Close())
	return d
}

// Dial connects to addr over network and, when the dial fails, says so
// on Refused.
func (d *DownTarget) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		select {
		case d.Refused <- struct{}{}:
		default:
		}
	}
	return conn, err
}
