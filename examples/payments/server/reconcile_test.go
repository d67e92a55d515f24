package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/internal/testwait"
	"github.com/idemkit/idem/internal/pgtest"
)

// A program that fails to start after its reconciler started stops the
// reconciler and returns the error, instead of waiting for a signal. The
// failure is the last step's, the River UI of -admin-token, on a schema
// where River's tables cannot be made (a river_job table of another shape
// is in the way); the port is bound before anything starts.
func TestRunStopsTheReconcilerWhenItFails(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	_, err := pool.Exec(context.Background(), "CREATE TABLE river_job (id text)")
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	returned := make(chan error, 1)
	go func() {
		returned <- run(context.Background(), []string{"-addr", "127.0.0.1:0", "-db", db, "-reconcile", "1s", "-admin-token", "t"},
			&stdout, &stderr, env(nil))
	}()
	err = testwait.Recv(t, returned, "run's return")
	assert.ErrorContains(t, err, "River UI")
	assert.Contains(t, stderr.String(), "reconciler started")
	assert.Empty(t, stdout.String(), "it never listened for requests")
}
