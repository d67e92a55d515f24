package main

import (
	"bytes"
	"context"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With its port taken, the server fails on the bind before it starts
// anything: the error, and not a line of the in-process gateway starting
// and shutting down.
func TestPortTakenFailsBeforeAnythingStarts(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"-addr", taken.Addr().String()}, &stdout, &stderr, noEnv)
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.Empty(t, stdout.String(), "nothing listens")
	assert.Empty(t, stderr.String(), "nothing started, so nothing logs its shutdown")
}
