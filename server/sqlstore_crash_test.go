//go:build unix

package server_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// crashChildEnv names the database URL of TestSQLStoreCrashBeforeCommit's
// child process, which serves payments and kills itself (SIGKILL) between
// the handler's return and the commit.
const crashChildEnv = "IDEM_SQL_CRASH_CHILD_DB"

// A process killed between the handler's return and the commit leaves
// nothing (the handler's row and the record roll back with the connection),
// and the retry, on another process, runs once and then replays. So does
// one killed before the commit of the app's own transaction, which stored
// the response (StoreInSQLTx); one killed after that commit has its
// response replayed.
func TestSQLStoreCrashBeforeCommit(t *testing.T) {
	if url := os.Getenv(crashChildEnv); url != "" {
		crashChild(t, url, os.Getenv(crashAtEnv))
		return
	}
	cases := []struct {
		at       string
		replayed bool // the retry replays: the app's transaction had committed
	}{
		{"handled", false},           // between the handler's return and the middleware's commit
		{"app-before-commit", false}, // StoreInSQLTx done, the app's own commit not
		{"app-after-commit", true},   // the app's own commit done, the response not sent
	}
	for _, c := range cases {
		t.Run(c.at, func(t *testing.T) {
			t.Parallel()
			crashAndRetry(t, c.at, c.replayed)
		})
	}
}

// crashAtEnv says where the child kills itself (see crashChild).
const crashAtEnv = "IDEM_SQL_CRASH_AT"

func crashAndRetry(t *testing.T, at string, replayed bool) {
	k := newSQLKit(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSQLStoreCrashBeforeCommit$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+k.url, crashAtEnv+"="+at)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := childAddr(t, bufio.NewScanner(out))

	_, err = payAt(t, "http://"+addr, "k-crash")
	require.Error(t, err, "the child dies before it answers")
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "the child was killed")
	if replayed {
		assert.Equal(t, 1, k.rows(t), "the app's transaction committed")
	} else {
		assert.Equal(t, 0, k.rows(t), "the killed attempt left no row")
	}

	srv := k.serve(t, ledgerHandler, server.Hooks{})
	r := mustPay(t, srv, "k-crash")
	assert.Equal(t, http.StatusCreated, r.status, r.body)
	if replayed {
		assert.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	} else {
		assert.Empty(t, r.header.Get("Idempotent-Replayed"))
	}
	r = mustPay(t, srv, "k-crash")
	assert.Equal(t, "true", r.header.Get("Idempotent-Replayed"), "the retry after it replays")
	assert.Equal(t, 1, k.rows(t), "the retry made one row")
}

// ledgerHandler inserts one ledger row in the request's *sql.Tx.
func ledgerHandler(w http.ResponseWriter, r *http.Request) {
	tx, _ := server.SQLTx(r.Context())
	if _, err := tx.ExecContext(r.Context(), `INSERT INTO ledger SELECT coalesce(max(id), 0) + 1 FROM ledger`); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"paid":true}`))
}

// crashChild serves a payment on url's database, prints its address, and
// kills itself in the first request, where at says: "handled", as
// ledgerHandler returns; "app-before-commit" and "app-after-commit", around
// the commit of a handler that stores its response in its own transaction
// (StoreInSQLTx).
func crashChild(t *testing.T, url, at string) {
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	var hooks server.Hooks
	h := http.HandlerFunc(ledgerHandler)
	if at == "handled" {
		hooks.Handled = func(context.Context, server.Event) { die() }
	} else {
		h = appTxHandler(db, at)
	}
	mw := server.Middleware(server.NewPostgresSQLStore(db), server.Config{Hooks: hooks, Logger: slog.New(slog.DiscardHandler)})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw(h))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fmt.Printf("addr %s\n", ln.Addr())
	_ = http.Serve(ln, mux)
}

// die kills the process, as a crash would.
func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal arrives
}

// appTxHandler is ledgerHandler in the app's own transaction, which it
// stores its response in, dying before or after its commit.
func appTxHandler(db *sql.DB, at string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger SELECT coalesce(max(id), 0) + 1 FROM ledger`); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"paid":true}`))
		if err := server.StoreInSQLTx(ctx, tx); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if at == "app-before-commit" {
			die()
		}
		if err := tx.Commit(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		die()
	}
}

// childAddr reads the child's "addr" line.
func childAddr(t *testing.T, sc *bufio.Scanner) string {
	t.Helper()
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "addr "); ok {
			return addr
		}
	}
	t.Fatalf("the child printed no address: %v", sc.Err())
	return ""
}

// payAt posts a payment with key to the server at base.
func payAt(t *testing.T, base, key string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/payments", strings.NewReader(`{"amount":1}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	return resp, err
}
