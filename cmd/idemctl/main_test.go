package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// ctl runs idemctl with args and stdin on db, and returns its exit status
// and output.
func ctl(t *testing.T, db, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := env{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr,
		getenv: func(string) string { return db }}
	code := run(context.Background(), args, e)
	return code, stdout.String(), stderr.String()
}

// charges makes Leased charges on pool's records: a "stuck-*" key's
// attempt answers 502 (its lease ends, its record stays), a "live-*"
// one's runs until the test ends, the others answer 201.
func charges(t *testing.T, pool *pgxpool.Pool, keys ...string) {
	t.Helper()
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls, _ := server.LeaseFrom(r.Context())
		_ = ls.Checkpoint(r.Context(), "gateway-called", nil)
		op, _ := server.OperationFrom(r.Context())
		switch {
		case strings.HasPrefix(op.Key, "stuck-"):
			w.WriteHeader(http.StatusBadGateway)
		case strings.HasPrefix(op.Key, "live-"):
			<-release
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"charge_id":"ch_1"}`))
		}
	})
	mux := http.NewServeMux()
	cfg := server.Config{Mode: server.Leased, Scope: func(*http.Request) (string, string) { return "acme", "alice" },
		Logger: slog.New(slog.DiscardHandler)}
	mux.Handle("POST /v1/charges", server.Middleware(server.NewPostgresStore(pool), cfg)(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	for _, key := range keys {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		if strings.HasPrefix(key, "live-") {
			go func() {
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			continue
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
}

var scope = []string{"-tenant", "acme", "-principal", "alice", "-route", "POST /v1/charges"}

func withScope(cmd string, rest ...string) []string {
	return append(append([]string{cmd}, scope...), rest...)
}

func TestKeyInFlightAndEvict(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	require.NoError(t, server.Migrate(context.Background(), pool))
	charges(t, pool, "done-1", "stuck-1", "live-1")
	require.Eventually(t, func() bool { code, _, _ := ctl(t, db, "", withScope("key", "live-1")...); return code == 0 },
		10*time.Second, 5*time.Millisecond)

	code, out, _ := ctl(t, db, "", withScope("key", "done-1")...)
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "done")
	assert.Contains(t, out, "201")

	code, out, _ = ctl(t, db, "", append([]string{"-json"}, withScope("key", "-payload", "done-1")...)...)
	require.Equal(t, exitOK, code, out)
	var rec recordView
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	assert.Equal(t, "done", rec.State)
	assert.JSONEq(t, `{"charge_id":"ch_1"}`, *rec.Body)

	code, _, errOut := ctl(t, db, "", withScope("key", "nope")...)
	assert.Equal(t, exitNotFound, code, errOut)
	assert.Contains(t, errOut, "no record for this key")
	code, _, errOut = ctl(t, db, "", "key", "-route", "", "k")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "bad scope")
	code, _, _ = ctl(t, db, "", "frobnicate")
	assert.Equal(t, exitUsage, code)

	code, out, _ = ctl(t, db, "", "inflight", "-stuck")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "stuck-1")
	assert.Contains(t, out, "STUCK")
	assert.NotContains(t, out, "live-1")
	code, out, _ = ctl(t, db, "", "inflight")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "live-1")

	code, _, errOut = ctl(t, db, "no\n", withScope("evict", "stuck-1")...)
	assert.Equal(t, exitRefused, code, "declined")
	assert.Contains(t, errOut, "Type yes")
	code, _, errOut = ctl(t, db, "", withScope("evict", "-yes", "live-1")...)
	assert.Equal(t, exitRefused, code, "a live lease without -force")
	assert.Contains(t, errOut, "lease is live")
	for _, key := range []string{"stuck-1", "live-1"} {
		code, _, _ = ctl(t, db, "", withScope("key", key)...)
		assert.Equal(t, exitOK, code, "%s: still there: nothing changed", key)
	}

	code, out, _ = ctl(t, db, "yes\n", withScope("evict", "stuck-1")...)
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "evicted")
	code, _, _ = ctl(t, db, "", withScope("key", "stuck-1")...)
	assert.Equal(t, exitNotFound, code)
	code, _, _ = ctl(t, db, "", withScope("evict", "-yes", "-force", "live-1")...)
	assert.Equal(t, exitOK, code)

	code, out, _ = ctl(t, db, "", "stats")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, `none (relation "river_job" does not exist)`)
}

// A database without the records' table (a wrong -db or search_path)
// is named as such, not as an SQL error.
func TestNoRecordsTable(t *testing.T) {
	db := pgtest.SchemaURL(t)
	for _, args := range [][]string{withScope("key", "k"), {"inflight"}, withScope("evict", "-yes", "k"), {"stats"}} {
		code, _, errOut := ctl(t, db, "", args...)
		assert.Equal(t, exitFailed, code, "%v", args)
		assert.Contains(t, errOut, "no idem_records table", "%v", args)
	}
}

// A database without the outbox's tables is named as such by every
// outbox command, from the outbox's own error (issue 49, item 6).
func TestNoOutboxTables(t *testing.T) {
	db := pgtest.SchemaURL(t)
	for _, args := range [][]string{{"parked"}, {"message", "1"}, {"message", "-key", "k"}, {"redrive", "1"},
		{"-outbox-schema", "nowhere", "parked"}} {
		code, _, errOut := ctl(t, db, "", args...)
		assert.Equal(t, exitFailed, code, "%v", args)
		assert.Contains(t, errOut, "no outbox here: relation", "%v", args)
		assert.Contains(t, errOut, "does not exist (outbox.Migrate creates its tables", "%v", args)
	}
}

func TestParkedMessageAndRedrive(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	ctx := context.Background()
	require.NoError(t, server.Migrate(ctx, pool))
	require.NoError(t, outbox.Migrate(ctx, pool))
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Set-Cookie", "partner_session=c00kie")
		http.Error(w, "unknown event", http.StatusBadRequest)
	}))
	t.Cleanup(refusing.Close)
	ob, err := outbox.New(pool, outbox.Config{Logger: slog.New(slog.DiscardHandler), PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	var id int64
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		id, err = ob.Enqueue(ctx, tx, outbox.Message{Name: "payment.created", Method: "POST", URL: refusing.URL + "/hook",
			Header: http.Header{"Authorization": {"Bearer s3cret"}}, Key: "msg-1", Body: []byte(`{}`)})
		return err
	}))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- ob.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	require.Eventually(t, func() bool { p, _ := ob.Parked(ctx, 0, 1); return len(p) == 1 }, 20*time.Second, 10*time.Millisecond)

	code, out, _ := ctl(t, db, "", "parked")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "payment.created")
	assert.Contains(t, out, "refused")

	code, out, _ = ctl(t, db, "", "message", fmt.Sprint(id))
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "parked (refused)")
	assert.Contains(t, out, "unknown event")
	assert.Contains(t, out, "withheld (never shown): Authorization, Set-Cookie")

	// Neither form of any command shows a message's credentials or the
	// downstream's cookie.
	for _, args := range [][]string{
		{"parked"}, {"-json", "parked"}, {"message", fmt.Sprint(id)},
		{"-json", "message", fmt.Sprint(id)}, {"-json", "message", "-key", "msg-1"},
	} {
		code, out, errOut := ctl(t, db, "", args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		assert.NotContains(t, out, "s3cret", "%v", args)
		assert.NotContains(t, out, "c00kie", "%v", args)
	}
	code, out, _ = ctl(t, db, "", "-json", "parked")
	require.Equal(t, exitOK, code)
	var parked struct {
		Parked []struct {
			ID       int64
			Withheld []string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &parked), out)
	require.Len(t, parked.Parked, 1)
	assert.Equal(t, []string{"Authorization", "Set-Cookie"}, parked.Parked[0].Withheld)

	code, _, _ = ctl(t, db, "", "message", "999999")
	assert.Equal(t, exitNotFound, code)
	code, _, _ = ctl(t, db, "", "message", "x")
	assert.Equal(t, exitUsage, code)

	// An unknown message is not found, asked nothing; a message that is
	// not parked is refused before the question.
	code, _, errOut := ctl(t, db, "yes\n", "redrive", "-past-retention", "999999")
	assert.Equal(t, exitNotFound, code, errOut)
	assert.NotContains(t, errOut, "Type yes")
	code, out, _ = ctl(t, db, "", "redrive", fmt.Sprint(id))
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "redriven")
	code, _, errOut = ctl(t, db, "yes\n", "redrive", "-past-retention", fmt.Sprint(id))
	assert.Equal(t, exitRefused, code, "a re-driven message is no longer parked: %s", errOut)
	assert.NotContains(t, errOut, "Type yes")

	code, out, _ = ctl(t, db, "", "stats")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "outbox parked")
}
