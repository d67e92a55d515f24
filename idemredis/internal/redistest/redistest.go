// Package redistest gives the idemredis tests a Redis: the machine's
// (REDIS_ADDR, by default 127.0.0.1:6379), and private servers that a
// test starts itself on free loopback ports (a three-master Cluster, a
// master and its replica), stopped when the test ends. Outside CI a test
// skips with a clear message when no Redis answers or redis-server is
// missing; under CI=true it fails instead, so that a green CI run means
// the Redis tests ran.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Addr returns the address of the machine's Redis after checking that it
// answers PING, or skips (fails under CI=true) the test.
func Addr(tb testing.TB) string {
	tb.Helper()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unavailable(tb, fmt.Sprintf("no Redis answers at %s (REDIS_ADDR): %v", addr, err))
	}
	return addr
}

func unavailable(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s; under CI=true the Redis tests must run (bash .ci/run starts redis-server)", why)
	}
	tb.Skipf("%s; skipping the Redis test (bash .ci/run starts redis-server)", why)
}

// Server is a redis-server process that a test started.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
}

// Start starts redis-server on a free loopback port with extra arguments
// (say "--cluster-enabled", "yes"), in a directory of its own, without
// persistence, and waits until it answers. It is killed when the test
// ends.
func Start(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(tb, "redis-server is not installed (apt-get install redis-server)")
	}
	dir := tb.TempDir()
	port := freePort(tb)
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--maxmemory-policy", "noeviction"}, extra...)
	cmd := exec.Command(bin, args...)
	log, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, dir: dir}
	tb.Cleanup(func() { s.Kill(); _ = log.Close() })
	s.waitReady(tb)
	return s
}

func (s *Server) waitReady(tb testing.TB) {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			tb.Fatalf("redis-server at %s did not answer within 10s; log:\n%s", s.Addr, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log is the server's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return string(b)
}

// Kill kills the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// Stop pauses the server (SIGSTOP), Continue resumes it.
func (s *Server) Stop() error     { return s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *Server) Continue() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Cluster starts a Redis Cluster of n masters and no replicas on loopback
// (redis-server --cluster-enabled yes, redis-cli --cluster create) and
// returns its nodes' addresses once every node reports cluster_state:ok.
func Cluster(tb testing.TB, n int) []string {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		unavailable(tb, "redis-cli is not installed (apt-get install redis-tools)")
	}
	var addrs []string
	for range n {
		s := Start(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		addrs = append(addrs, s.Addr)
	}
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range addrs {
		for !clusterOK(addr) {
			if time.Now().After(deadline) {
				tb.Fatalf("the cluster at %s is not ok after 20s", addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return addrs
}

func clusterOK(addr string) bool {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.ClusterInfo(context.Background()).Result()
	return err == nil && strings.Contains(info, "cluster_state:ok")
}

// Replica starts a replica of master and waits until its link is up and
// it has synced.
func Replica(tb testing.TB, master *Server) *Server {
	tb.Helper()
	host, port, _ := net.SplitHostPort(master.Addr)
	m := redis.NewClient(&redis.Options{Addr: master.Addr})
	defer m.Close()
	if err := m.ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err(); err != nil {
		tb.Fatalf("CONFIG SET repl-diskless-sync-delay on %s: %v", master.Addr, err)
	}
	r := Start(tb, "--replicaof", host, port)
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The replica's link is up on its side before the master counts it
		// for WAIT: wait for both, so that a first WAIT sees the replica.
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && linkUp(info) {
			if synced(m) {
				return r
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the replica at %s did not sync with %s within 20s: %v\n%s", r.Addr, master.Addr, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// synced reports whether a replica acknowledges a write on the master m
// within 100 ms (WAIT counts the acknowledgements of this connection's
// own writes, so it needs one).
func synced(m *redis.Client) bool {
	ctx := context.Background()
	var wait *redis.Cmd
	_, err := m.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "redistest:synced", "1", time.Minute)
		wait = p.Do(ctx, "wait", 1, 100)
		return nil
	})
	n, _ := wait.Int64()
	return err == nil && n >= 1
}

func linkUp(info string) bool {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "master_link_status:up" {
			return true
		}
	}
	return false
}
