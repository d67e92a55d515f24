//go:build unix

// Package pgcluster runs PostgreSQL clusters of a test's own, each in a
// temporary directory on a free loopback port: a primary (Start), streaming
// standbys of it (Cluster.Standby), and the faults a replicated database
// meets (Cluster.Kill, Cluster.Promote, Cluster.Restart). A test may kill,
// restart or promote them without disturbing the shared server
// (DATABASE_URL) that other packages' tests use at the same time.
//
// The programs (initdb, pg_ctl, pg_basebackup) are found in the newest
// /usr/lib/postgresql/<version>/bin, where Debian's packages put them. As
// root, who may not run PostgreSQL, they run as the postgres user. When
// either is missing the test skips, and fails instead under CI=true, where
// every test must run.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Config configures a cluster. Its zero value is a cluster with trust
// authentication, no fsync (nothing here must survive the machine) and
// PostgreSQL's defaults otherwise.
type Config struct {
	// Settings are server settings given on the command line (-c
	// name=value), over the defaults: {"fsync": "on"} turns fsync back on,
	// {"synchronous_standby_names": "*"} makes every standby synchronous.
	Settings map[string]string
}

// Cluster is a running PostgreSQL cluster of one test. Its methods are
// safe for concurrent use: each runs a program or sends a signal.
type Cluster struct {
	bin      string            // the directory of initdb and pg_ctl
	dir      string            // the test's directory: data, log, sockets
	data     string            // the data directory
	log      string            // the server's log file
	port     string            // the TCP port, on 127.0.0.1
	options  string            // pg_ctl's -o: port, addresses
	settings map[string]string // Config.Settings over the defaults
	runAs    []string          // the prefix that runs a program as the cluster's owner, nil for the test's user
}

// Start creates a cluster (initdb) and starts it; it is stopped (with an
// immediate shutdown) when the test ends.
func Start(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	c := newCluster(tb, cfg)
	c.run(tb, "initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
	c.writeConf(tb, "postgresql.conf", "include_if_exists = '"+settingsFile+"'\n", os.O_APPEND)
	c.writeSettings(tb)
	c.start(tb)
	return c
}

// Standby takes a base backup of c (pg_basebackup -R, the WAL streamed
// with it) into a new cluster, starts it as a streaming standby of c with
// cfg's settings, and waits until c lists it as streaming and it has
// reported where its disk is (from then on c counts it as a synchronous
// standby when its name is in synchronous_standby_names). It is stopped
// when the test ends.
func (c *Cluster) Standby(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	s := newCluster(tb, cfg)
	s.run(tb, "pg_basebackup", "-h", "127.0.0.1", "-p", c.port, "-U", "postgres", "-D", s.data,
		"-R", "-X", "stream", "-c", "fast", "--no-sync")
	s.writeSettings(tb) // over the primary's copy
	s.start(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		n, err := c.streaming(ctx)
		if err == nil && n > 0 {
			return s
		}
		if ctx.Err() != nil {
			tb.Fatalf("pgcluster: the standby on port %s is not streaming within 30s (%v); its log:\n%s", s.port, err, s.LogTail())
		}
		time.Sleep(20 * time.Millisecond) // polling for the standby's state, not waiting for time to pass
	}
}

// streaming counts the standbys that c streams WAL to and that reported
// their flush position.
func (c *Cluster) streaming(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND flush_lsn IS NOT NULL`).Scan(&n)
	return n, err
}

// newCluster prepares a cluster's directory and free port.
func newCluster(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	dir := tb.TempDir()
	c := &Cluster{bin: binDir(tb), dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "postgres.log"), runAs: owner(tb, dir)}
	c.port = freePort(tb)
	c.settings = map[string]string{"fsync": "off", "max_connections": "60"}
	maps.Copy(c.settings, cfg.Settings)
	c.options = fmt.Sprintf("-p %s -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s", c.port, dir)
	return c
}

// settingsFile holds Config.Settings in the data directory. A file, not
// the command line, which would override ALTER SYSTEM; a file of each
// cluster's own, so that a standby does not inherit its primary's
// settings from the base backup (synchronous_standby_names would make
// the promoted standby wait for standbys of its own).
const settingsFile = "pgcluster.conf"

// writeSettings writes Config.Settings into the settings file, which
// postgresql.conf includes.
func (c *Cluster) writeSettings(tb testing.TB) {
	tb.Helper()
	var conf strings.Builder
	for _, name := range slices.Sorted(maps.Keys(c.settings)) {
		fmt.Fprintf(&conf, "%s = '%s'\n", name, strings.ReplaceAll(c.settings[name], "'", "''"))
	}
	c.writeConf(tb, settingsFile, conf.String(), os.O_TRUNC)
}

// writeConf writes text to a configuration file of the cluster (flag
// os.O_APPEND or os.O_TRUNC), owned as the data directory is.
func (c *Cluster) writeConf(tb testing.TB, file, text string, flag int) {
	tb.Helper()
	path := filepath.Join(c.data, file)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag, 0o600)
	if err == nil {
		_, err = f.WriteString(text)
		err = errors.Join(err, f.Close())
	}
	if info, statErr := os.Stat(c.data); err == nil && statErr == nil {
		st := info.Sys().(*syscall.Stat_t)
		err = os.Chown(path, int(st.Uid), int(st.Gid))
	}
	if err != nil {
		tb.Fatalf("pgcluster: %v", err)
	}
}

// start starts the server and arranges its stop at the end of the test.
func (c *Cluster) start(tb testing.TB) {
	tb.Helper()
	c.run(tb, "pg_ctl", "start", "-w", "-t", "60", "-D", c.data, "-l", c.log, "-o", c.options)
	tb.Cleanup(func() { _ = c.exec("pg_ctl", "stop", "-m", "immediate", "-w", "-D", c.data) })
}

// URL is the cluster's connection URL, as its superuser, to the database
// postgres.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", c.port)
}

// Addr is the cluster's host:port.
func (c *Cluster) Addr() string { return "127.0.0.1:" + c.port }

// Restart restarts the cluster with a fast shutdown (sessions are
// terminated, open transactions roll back) and waits until it accepts
// connections again. The new server keeps the options of Start and
// writes to the same log.
func (c *Cluster) Restart() error {
	return c.exec("pg_ctl", "restart", "-m", "fast", "-w", "-t", "60", "-D", c.data, "-l", c.log, "-o", c.options)
}

// Promote promotes a standby to a primary (pg_ctl promote) and waits until
// it takes writes.
func (c *Cluster) Promote() error {
	return c.exec("pg_ctl", "promote", "-w", "-t", "60", "-D", c.data)
}

// Kill kills the server with SIGKILL, the postmaster and every process of
// it at once, as the loss of its machine would, and waits until they are
// all gone. Nothing is flushed or shut down: what was not on disk (or, for
// a standby, not yet received) is lost, and no backend outlives the
// postmaster to answer one more query.
func (c *Cluster) Kill() error {
	return KillServer(c.data)
}

// KillServer kills the server of the data directory data as
// Cluster.Kill does: the postmaster (found in postmaster.pid) and each of
// its children at once, with SIGKILL, and waits until they are gone. It
// serves for servers that this package did not start, such as an HA
// manager's.
func KillServer(data string) error {
	pid, err := postmasterPID(data)
	if err != nil {
		return err
	}
	// Each child of the postmaster is a session of its own, so no process
	// group holds them all: the postmaster is stopped, so that it forks no
	// more, and then it and each child it has are killed.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pgcluster: stop %d: %w", pid, err)
	}
	victims := append(children(pid), pid)
	for _, v := range victims {
		if err := syscall.Kill(v, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pgcluster: kill %d: %w", v, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, v := range victims {
		for alive(v) {
			if time.Now().After(deadline) {
				return fmt.Errorf("pgcluster: process %d of the server still runs 30s after SIGKILL", v)
			}
			time.Sleep(5 * time.Millisecond) // polling for the process's end
		}
	}
	return nil
}

// children returns the processes whose parent is pid, from /proc.
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, path := range stats {
		stat, err := os.ReadFile(path)
		if err != nil {
			continue // it ended
		}
		// pid (comm) state ppid ...: the command name may hold spaces
		_, rest, _ := strings.Cut(string(stat), ") ")
		fields := strings.Fields(rest)
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		if child, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
			out = append(out, child)
		}
	}
	return out
}

// postmasterPID returns the process id of the postmaster of the data
// directory dir, from its postmaster.pid.
func postmasterPID(dir string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: %w", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: postmaster.pid: %w", err)
	}
	return pid, nil
}

// alive reports whether pid runs: it exists and is no zombie (nobody may
// reap the postmaster, whose parent pg_ctl exited).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	_, rest, _ := strings.Cut(string(stat), ") ") // after the command name, which may hold spaces
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// LogTail returns the last 8 KiB of the server's log, for failure
// messages.
func (c *Cluster) LogTail() string { return tail(c.log) }

// run runs a PostgreSQL program as exec does, and fails the test when it
// fails.
func (c *Cluster) run(tb testing.TB, program string, args ...string) {
	tb.Helper()
	if err := c.exec(program, args...); err != nil {
		tb.Fatal(err)
	}
}

// exec runs a PostgreSQL program as the cluster's owner, bounded by 90
// seconds; its error carries the program's output.
func (c *Cluster) exec(program string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append(slices.Clone(c.runAs), append([]string{filepath.Join(c.bin, program)}, args...)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 5 * time.Second // a server started in the background must not hold the output open
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgcluster: %s %v: %w: %s", program, args, err, out)
	}
	return nil
}

// binDir returns the newest /usr/lib/postgresql/*/bin that has initdb,
// pg_ctl and pg_basebackup.
func binDir(tb testing.TB) string {
	tb.Helper()
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int { return version(b) - version(a) })
	for _, initdb := range found {
		dir := filepath.Dir(initdb)
		if has(dir, "pg_ctl") && has(dir, "pg_basebackup") {
			return dir
		}
	}
	CannotRun(tb, "no PostgreSQL programs in /usr/lib/postgresql/*/bin (initdb, pg_ctl, pg_basebackup)")
	return ""
}

func has(dir, program string) bool {
	_, err := os.Stat(filepath.Join(dir, program))
	return err == nil
}

// version is the major version in a /usr/lib/postgresql/<v>/bin path.
func version(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// owner prepares dir for a cluster and returns the prefix that runs the
// PostgreSQL programs as its owner: nothing for an ordinary user; for
// root, runuser as the postgres user, who then owns dir and must be able
// to reach it.
func owner(tb testing.TB, dir string) []string {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		CannotRun(tb, "running as root, and there is no postgres user to run a private cluster as")
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		runuser = "/usr/sbin/runuser"
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil { // the test's temporary root: 0700
		tb.Fatal(err)
	}
	return []string{runuser, "-u", "postgres", "--"}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// CannotRun skips the test with why, or fails it under CI=true, where
// every test must run.
func CannotRun(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s; under CI=true this test must run", why)
	}
	tb.Skipf("%s; skipping", why)
}
