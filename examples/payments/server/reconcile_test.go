package main

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/internal/testwait"
)

// A program that fails to start after its reconciler started stops the
// reconciler and returns the error, instead of waiting for a signal.
func TestRunStopsTheReconcilerWhenItFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	var stdout, stderr bytes.Buffer
	returned := make(chan error, 1)
	go func() {
		returned <- run(context.Background(), []string{"-addr", taken.Addr().String(), "-reconcile", "1s"},
			&stdout, &stderr, env(nil))
	}()
	err = testwait.Recv(t, returned, "run's return")
	assert.ErrorContains(t, err, "address already in use")
	assert.Contains(t, stderr.String(), "reconciler started")
}
