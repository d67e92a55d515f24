package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// A short run: both passes settle every operation once (run checks the
// records), and the report has its figures.
func TestRunReconcileBench(t *testing.T) {
	var out bytes.Buffer
	c := config{db: pgtest.DatabaseURL(t), ops: 300, batch: 32, conns: 4, clients: 2, reconcilerConns: 2,
		window: 100 * time.Millisecond, passTimeout: time.Minute}
	require.NoError(t, run(context.Background(), c, &out))
	for _, line := range []string{"pass alone:       300 settled in ", "pass under load:  300 settled in ",
		"payments before:  ", "payments after:   ", "payments during the pass / not: "} {
		assert.Contains(t, out.String(), line)
	}
	assert.False(t, strings.Contains(out.String(), " 0 req/s"), "the payments ran:\n%s", out.String())
}

// abandon makes operations that the reconciler takes over: the clones of a
// real abandoned record, not the record alone.
func TestAbandonClonesARealRecord(t *testing.T) {
	pool, drop, err := openSchema(context.Background(), pgtest.DatabaseURL(t), 2)
	require.NoError(t, err)
	t.Cleanup(drop)
	ctx := context.Background()
	c := config{ops: 50, batch: 7, passTimeout: time.Minute}
	res, err := seededPass(ctx, c, pool, server.NewPostgresStore(pool), "t", nil)
	require.NoError(t, err)
	assert.Equal(t, 50, res.settled)
	var template int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM idem_records WHERE idem_key = 't-template'`).Scan(&template))
	assert.Zero(t, template, "the template is gone")
}
