package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// The answers of issue 46 that misled: each test here failed before.

// A route typed without its method is refused (exit 2), not answered
// "no record"; a key alone lists every scope that holds it.
func TestKeyWithoutTheRouteMethodOrWithoutARoute(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	require.NoError(t, server.Migrate(context.Background(), pool))
	charges(t, pool, "done-1")

	for _, args := range [][]string{{"key"}, {"evict", "-yes"}} {
		cmd := args[0]
		code, _, errOut := ctl(t, db, "", append(args, "-tenant", "acme", "-principal", "alice", "-route", "/v1/charges", "done-1")...)
		assert.Equal(t, exitUsage, code, "%s: %s", cmd, errOut)
		assert.Contains(t, errOut, `the route "/v1/charges" has no method`, cmd)
		assert.Contains(t, errOut, `"POST /v1/charges"`, cmd)
		assert.NotContains(t, errOut, "no record", cmd)
	}

	code, out, errOut := ctl(t, db, "", "key", "done-1")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "POST /v1/charges")
	assert.Contains(t, out, "alice")
	assert.Contains(t, out, "done")

	code, out, _ = ctl(t, db, "", "-json", "key", "done-1")
	require.Equal(t, exitOK, code)
	var found struct {
		Records []recordView `json:"records"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &found), out)
	require.Len(t, found.Records, 1)
	assert.Equal(t, "POST /v1/charges", found.Records[0].Route)
	assert.Equal(t, "acme", found.Records[0].Tenant)

	code, _, errOut = ctl(t, db, "", "key", "never-used")
	assert.Equal(t, exitNotFound, code, errOut)
	assert.Contains(t, errOut, `no record of key "never-used" in any scope`)
	code, _, errOut = ctl(t, db, "", "evict", "-yes", "done-1")
	assert.Equal(t, exitUsage, code, "evict needs the whole scope: %s", errOut)
	assert.Contains(t, errOut, "idemctl key done-1 lists the scopes that hold the key")
}

// Records are counted exactly while few: a table never analyzed has no
// estimate (reltuples -1), which read as "Records 0".
func TestStatsCountsRecordsExactly(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	require.NoError(t, server.Migrate(context.Background(), pool))
	charges(t, pool, "done-1", "done-2", "done-3")

	code, out, _ := ctl(t, db, "", "stats")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `records\s+3\n`, out)

	code, out, _ = ctl(t, db, "", "-json", "stats")
	require.Equal(t, exitOK, code)
	var s struct {
		Records struct {
			Records    int64  `json:"records"`
			RecordsAre string `json:"records_are"`
		} `json:"records"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	assert.EqualValues(t, 3, s.Records.Records, out)
	assert.Equal(t, "exact", s.Records.RecordsAre)
}

// A service without an outbox has no parked message: not a failure.
func TestParkedWithoutAnOutbox(t *testing.T) {
	db := pgtest.SchemaURL(t)
	code, out, errOut := ctl(t, db, "", "parked")
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "no outbox here, so no parked message")
	code, out, _ = ctl(t, db, "", "-json", "parked")
	assert.Equal(t, exitOK, code)
	assert.JSONEq(t, `{"parked": [], "no_outbox": "relation \"river_job\" does not exist"}`, out)
}

// snake is the one naming style of -json: every field name, but the
// names of HTTP headers (under a field whose name ends in "header").
var snake = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// checkNames fails t for a field of v not in snake_case.
func checkNames(t *testing.T, cmd string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for name, field := range v {
			assert.Regexp(t, snake, name, "%s: field %q", cmd, name)
			if !strings.HasSuffix(name, "header") {
				checkNames(t, cmd, field)
			}
		}
	case []any:
		for _, e := range v {
			checkNames(t, cmd, e)
		}
	}
}

// Every command's -json has one naming style, durations in seconds, and
// bodies as text when they are text.
func TestJSONHasOneStyle(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	ctx := context.Background()
	require.NoError(t, server.Migrate(ctx, pool))
	require.NoError(t, outbox.Migrate(ctx, pool))
	charges(t, pool, "done-1", "stuck-1")
	id := parkOne(t, pool)

	for _, args := range [][]string{
		withScope("key", "-payload", "done-1"), {"key", "done-1"}, {"inflight"}, {"parked"},
		{"message", fmt.Sprint(id)}, {"stats"},
	} {
		code, out, errOut := ctl(t, db, "", append([]string{"-json"}, args...)...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		var v any
		require.NoError(t, json.Unmarshal([]byte(out), &v), out)
		checkNames(t, args[0], v)
		assert.NotContains(t, out, "e30=", "%v: the body {} as text, not base64", args)
		assert.NotRegexp(t, `"oldest_[a-z]+": [0-9]{7,}`, out, "%v: durations in seconds", args)
	}
	_, out, _ := ctl(t, db, "", "-json", "message", fmt.Sprint(id))
	assert.Contains(t, out, `"body": "{}"`)
	assert.Contains(t, out, `"redrive_by"`)
}
