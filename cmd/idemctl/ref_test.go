package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// chargeRef is the operation reference the answers of charges carry.
func chargeRef(key string) string {
	return server.OperationRef("acme", "alice", "POST /v1/charges", key)
}

// An operator who holds only an answer's Idempotency-Operation-Ref finds
// the record with key -ref.
func TestKeyByReference(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	require.NoError(t, server.Migrate(context.Background(), pool))
	charges(t, pool, "done-1")

	code, out, errOut := ctl(t, db, "", "key", "-ref", "-payload", chargeRef("done-1"))
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "key             done-1")
	assert.Contains(t, out, chargeRef("done-1"))
	assert.Contains(t, out, `{"charge_id":"ch_1"}`)

	code, out, errOut = ctl(t, db, "", "-json", "key", "-ref", chargeRef("done-1"))
	require.Equal(t, exitOK, code, errOut)
	var v recordView
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	assert.Equal(t, "done-1", v.Key)
	assert.Equal(t, chargeRef("done-1"), v.Ref)

	code, _, errOut = ctl(t, db, "", "key", "-ref", chargeRef("never"))
	assert.Equal(t, exitNotFound, code, errOut)
	assert.Contains(t, errOut, "no record has operation reference")
	code, _, errOut = ctl(t, db, "", "key", "-ref", "done-1")
	assert.Equal(t, exitUsage, code, "a key is not a reference: %s", errOut)
	code, _, errOut = ctl(t, db, "", withScope("key", "-ref", chargeRef("done-1"))...)
	assert.Equal(t, exitUsage, code, "a reference names the scope: %s", errOut)
}

func TestKeyByReferenceOnRedis(t *testing.T) {
	addr := redisAddr(t)
	prefix := redisCharges(t, addr, "done-1")
	on := []string{"-redis", "redis://" + addr + "/0", "-redis-prefix", prefix}

	code, out, errOut := ctl(t, "", "", append(on, "key", "-ref", chargeRef("done-1"))...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "key             done-1")
	code, _, errOut = ctl(t, "", "", append(on, "key", "-ref", chargeRef("never"))...)
	assert.Equal(t, exitNotFound, code, errOut)
}

// -json tells who resolved an uncertain operation, when and why.
func TestJSONHasTheResolution(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	require.NoError(t, server.Migrate(context.Background(), pool))
	charges(t, pool, "stuck-a")
	makeUncertain(t, server.NewPostgresStore(pool), 1)

	code, out, errOut := ctl(t, db, "", append([]string{"-json"}, withScope("resolve", "-yes", "-not-applied",
		"-by", "ops@acme", "-reason", "T-9: the gateway has no charge", "stuck-a")...)...)
	require.Equal(t, exitOK, code, errOut)
	checkResolution(t, out, "resolved")
	code, out, errOut = ctl(t, db, "", append([]string{"-json"}, withScope("key", "stuck-a")...)...)
	require.Equal(t, exitOK, code, errOut)
	checkResolution(t, "{\"resolved\":"+out+"}", "resolved")
	var decoded any
	require.NoError(t, json.Unmarshal([]byte(out), &decoded))
	checkNames(t, "key", decoded)
}

func checkResolution(t *testing.T, out, field string) {
	t.Helper()
	var got map[string]struct {
		Resolution map[string]any `json:"resolution"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	res := got[field].Resolution
	require.NotNil(t, res, "no resolution in %s", out)
	assert.Equal(t, "ops@acme", res["by"])
	assert.Equal(t, "T-9: the gateway has no charge", res["reason"])
	assert.Equal(t, false, res["applied"])
	assert.NotEmpty(t, res["at"])
}
