package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/internal/testwait"
)

// errorRecords is a slog.Handler that sends the message and the "err"
// attribute of every Error record to its channel.
type errorRecords chan string

func (h errorRecords) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h errorRecords) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h errorRecords) WithGroup(string) slog.Handler                { return h }

func (h errorRecords) Handle(_ context.Context, r slog.Record) error {
	var err string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			err = a.Value.String()
		}
		return true
	})
	h <- fmt.Sprintf("%s: %s", r.Message, err)
	return nil
}

// The in-process gateway's failure is logged, not dropped.
func TestServeGatewayLogsItsFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close()) // Serve fails at once
	records := make(errorRecords, 1)
	_, stop := serveGateway(context.Background(), ln, time.Second, slog.New(records))
	defer stop()
	record := testwait.Recv(t, records, "the gateway's error record")
	assert.Contains(t, record, "in-process gateway failed: ")
	assert.Contains(t, record, "use of closed network connection")
}
