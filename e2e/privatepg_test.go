//go:build unix

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// privatePostgres is a PostgreSQL cluster of one test's own, in a
// temporary directory, on a free loopback port: a test may restart it
// without disturbing the shared server that other packages' tests use at
// the same time.
type privatePostgres struct {
	bin   string   // the directory of initdb and pg_ctl
	data  string   // the data directory
	log   string   // the server's log file
	port  string   // the TCP port, on 127.0.0.1
	runAs []string // the command prefix that runs a program as the cluster's owner, nil for the test's user
}

// startPrivatePostgres creates a cluster (initdb, trust authentication,
// no fsync: nothing here must survive the machine) and starts it; it is
// stopped when the test ends. It skips the test when no PostgreSQL
// programs are installed, or when running as root without a postgres user
// (PostgreSQL refuses to run as root), and fails instead under CI=true.
func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	dir := t.TempDir()
	p := &privatePostgres{bin: postgresBinDir(t), data: filepath.Join(dir, "data"), log: filepath.Join(dir, "postgres.log"), runAs: clusterOwner(t, dir)}
	_, port, err := net.SplitHostPort(freeAddr(t))
	require.NoError(t, err)
	p.port = port
	p.run(t, "initdb", "-D", p.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
	options := fmt.Sprintf("-p %s -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c fsync=off -c max_connections=60", p.port, dir)
	p.run(t, "pg_ctl", "start", "-w", "-t", "60", "-D", p.data, "-l", p.log, "-o", options)
	t.Cleanup(func() { _ = p.exec("pg_ctl", "stop", "-m", "immediate", "-w", "-D", p.data) })
	return p
}

// url is the cluster's connection URL, as its superuser.
func (p *privatePostgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", p.port)
}

// restart restarts the cluster with a fast shutdown (sessions are
// terminated, open transactions roll back) and waits until it accepts
// connections again. The new server keeps the options of start and
// writes to the same log (without -l it would inherit pg_ctl's output).
func (p *privatePostgres) restart() error {
	return p.exec("pg_ctl", "restart", "-m", "fast", "-w", "-t", "60", "-D", p.data, "-l", p.log)
}

// run runs a PostgreSQL program as exec does, and fails the test when it
// fails.
func (p *privatePostgres) run(t *testing.T, program string, args ...string) {
	t.Helper()
	require.NoError(t, p.exec(program, args...))
}

// exec runs a PostgreSQL program as the cluster's owner, bounded by
// 90 seconds; its error carries the program's output.
func (p *privatePostgres) exec(program string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append(slices.Clone(p.runAs), append([]string{filepath.Join(p.bin, program)}, args...)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 5 * time.Second // a server started in the background must not hold the output open
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w: %s", program, args, err, out)
	}
	return nil
}

// postgresBinDir returns the newest /usr/lib/postgresql/*/bin that has
// initdb and pg_ctl.
func postgresBinDir(t *testing.T) string {
	t.Helper()
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int { return pgVersion(b) - pgVersion(a) })
	for _, initdb := range found {
		dir := filepath.Dir(initdb)
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir
		}
	}
	cannotRun(t, "no PostgreSQL programs in /usr/lib/postgresql/*/bin (initdb, pg_ctl)")
	return ""
}

// pgVersion is the major version in a /usr/lib/postgresql/<v>/bin path.
func pgVersion(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// clusterOwner prepares dir for the cluster and returns the prefix that
// runs the PostgreSQL programs as its owner: nothing for an ordinary user;
// for root, who may not run PostgreSQL, runuser as the postgres user, who
// then owns dir and must be able to reach it.
func clusterOwner(t *testing.T, dir string) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		cannotRun(t, "running as root, and there is no postgres user to run a private cluster as")
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		runuser = "/usr/sbin/runuser"
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	require.NoError(t, os.Chown(dir, uid, gid))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711)) // the test's temporary root: 0700
	return []string{runuser, "-u", "postgres", "--"}
}

// cannotRun skips the test with why, or fails it under CI=true, where
// every test must run.
func cannotRun(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; under CI=true this test must run", why)
	}
	t.Skipf("%s; skipping", why)
}
