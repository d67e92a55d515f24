//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgcluster"
)

// The program logs the database's durability report at start, a warning
// for each risk. With -require-durable it refuses a database whose report
// has a risk (here synchronous_commit=off for its sessions) before it
// listens, and starts on one whose report is clean (a primary alone,
// fsync on).
func TestRequireDurable(t *testing.T) {
	pg := pgcluster.Start(t, pgcluster.Config{Settings: map[string]string{"fsync": "on"}})
	risky := pg.URL() + "&synchronous_commit=off"

	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a run that serves returns nil then
	defer cancel()
	err := run(ctx, []string{"-addr", "127.0.0.1:0", "-db", risky, "-require-durable"}, &stdout, &stderr, noEnv)
	require.ErrorContains(t, err, "-require-durable: the database's durability report is not clean")
	assert.Contains(t, err.Error(), "risk synchronous_commit = off: ")
	assert.Empty(t, stdout.String(), "nothing listened")

	log := startAndStop(t, "-db", risky)
	assert.Contains(t, log, `level=WARN msg=durability setting=synchronous_commit value=off risk=true`, "the warning without the flag")

	log = startAndStop(t, "-db", pg.URL(), "-require-durable")
	assert.Contains(t, log, `level=INFO msg=durability setting=fsync value=on risk=false`)
	assert.NotContains(t, log, "level=WARN", "the log of a clean start")
}

func TestRequireDurableNeedsADatabase(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"-require-durable"}, io.Discard, &stderr, noEnv)
	require.ErrorIs(t, err, errUsage)
	assert.Contains(t, stderr.String(), "-require-durable needs -db")
}

func noEnv(string) string { return "" }

// startAndStop runs the program with args until it listens, stops it, and
// returns its log.
func startAndStop(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, stdout := io.Pipe()
	stderr := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), stdout, stderr, noEnv)
		_ = stdout.Close()
	}()
	line, _ := bufio.NewReader(out).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, out) }()
	require.True(t, strings.HasPrefix(line, "payments server: listening on "), "first line %q; log:\n%s", line, stderr)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "log:\n%s", stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("the server did not stop; log:\n%s", stderr)
	}
	return stderr.String()
}
