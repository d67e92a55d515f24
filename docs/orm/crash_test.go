//go:build unix

package orm_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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

// The child process of TestKilledBeforeCommit: the database URL and the
// recipe it serves.
const (
	childDBEnv     = "IDEM_ORM_CHILD_DB"
	childRecipeEnv = "IDEM_ORM_CHILD_RECIPE"
)

// A process killed between the handler's return and the commit leaves 0
// rows, and the retry makes 1: the ORM wrote in idem's transaction. (A
// handler in its own transaction has committed by then: the retry replays
// its response.)
func TestKilledBeforeCommit(t *testing.T) {
	if url := os.Getenv(childDBEnv); url != "" {
		child(t, url, os.Getenv(childRecipeEnv))
		return
	}
	eachRecipe(t, func(t *testing.T, k *kit, r recipe) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledBeforeCommit$")
		cmd.Env = append(os.Environ(), childDBEnv+"="+k.url, childRecipeEnv+"="+r.name)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addr := childAddr(t, bufio.NewScanner(out))

		_, err = pay("http://"+addr, "k-kill")
		require.Error(t, err, "the child dies before it answers")
		var exit *exec.ExitError
		require.True(t, errors.As(cmd.Wait(), &exit), "the child exits")
		assert.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())
		want := 0
		if r.own {
			want = 1
		}
		assert.Equal(t, want, k.rows(t, "k-kill"), "rows left by the killed process")

		srv := k.serve(t, r)
		retry, err := pay(srv.URL, "k-kill")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, retry.status, retry.body)
		assert.Equal(t, r.own, retry.header.Get("Idempotent-Replayed") == "true")
		assert.Equal(t, 1, k.rows(t, "k-kill"), "rows after the retry")
	})
}

// child serves the recipe named name on url's database, prints its
// address, and kills itself as the first handler returns, before the
// middleware commits.
func child(t *testing.T, url, name string) {
	db := open(t, url)
	die := server.Hooks{Handled: func(context.Context, server.Event) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal arrives
	}}
	for _, r := range recipes {
		if r.name != name {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		fmt.Printf("addr %s\n", ln.Addr())
		_ = http.Serve(ln, mux(db, r.handler(t, db), die))
	}
	t.Fatalf("no recipe %q", name)
}

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
