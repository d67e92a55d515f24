//go:build unix

package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Patroni is a PostgreSQL cluster under Patroni, the HA manager: one etcd
// (its distributed configuration store) and Nodes, each a Patroni process
// with the PostgreSQL server it manages, all on loopback. The first node
// bootstraps the cluster and leads; the others join as its streaming
// standbys. Patroni decides who leads through a leader key in etcd with a
// time to live, promotes a standby when the leader's key expires, and
// starts a returning node as a standby of the new leader (rewinding it
// with pg_rewind when its history diverged): the fencing a failover needs.
type Patroni struct {
	Nodes   []*PatroniNode
	dir     string
	etcd    *exec.Cmd
	etcdURL string
	cred    *syscall.Credential // whom Patroni runs as: the postgres user as root, nil otherwise
	cfg     PatroniConfig
	bin     string // PostgreSQL's programs
}

// PatroniConfig configures a Patroni cluster. Its zero value is two nodes,
// asynchronous replication, and Patroni's timing tightened for a test
// (a leader key that lives 10 s, a loop every second).
type PatroniConfig struct {
	// Nodes is how many nodes; zero means 2.
	Nodes int
	// Synchronous turns Patroni's synchronous_mode on: the leader names a
	// standby in synchronous_standby_names, and only a synchronous standby
	// may be promoted.
	Synchronous bool
	// TTL is the leader key's time to live: how long a dead leader goes
	// unnoticed. Zero means 10 s.
	TTL time.Duration
}

// PatroniNode is one node: a Patroni process and its PostgreSQL server.
type PatroniNode struct {
	Name    string
	p       *Patroni
	pgPort  string
	apiPort string
	data    string
	config  string
	log     string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// StartPatroni starts etcd and the nodes, and waits until the first node
// leads and every other one streams from it (and, with Synchronous, one of
// them is its synchronous standby). Everything is killed when the test
// ends. It fails the test when patroni or etcd is not installed (Debian:
// apt-get install patroni etcd-server).
func StartPatroni(tb testing.TB, cfg PatroniConfig) *Patroni {
	tb.Helper()
	if cfg.Nodes == 0 {
		cfg.Nodes = 2
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Second
	}
	for _, program := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(program); err != nil {
			tb.Fatalf("pgcluster: %s is not installed (Debian: apt-get install patroni etcd-server): %v", program, err)
		}
	}
	p := &Patroni{dir: tb.TempDir(), bin: binDir(tb), cfg: cfg}
	p.cred = credential(tb, p.dir)
	p.startEtcd(tb)
	for i := range cfg.Nodes {
		n := &PatroniNode{Name: fmt.Sprintf("node%d", i+1), p: p, pgPort: freePort(tb), apiPort: freePort(tb)}
		n.data = filepath.Join(p.dir, n.Name)
		n.config = filepath.Join(p.dir, n.Name+".yml")
		n.log = filepath.Join(p.dir, n.Name+".log")
		if err := os.WriteFile(n.config, []byte(n.yaml()), 0o644); err != nil {
			tb.Fatal(err)
		}
		p.Nodes = append(p.Nodes, n)
		n.Start(tb)
		want := "/replica"
		if i == 0 {
			want = "/primary"
		}
		n.WaitFor(tb, want, 2*time.Minute)
	}
	if cfg.Synchronous && cfg.Nodes > 1 {
		p.Nodes[1].WaitFor(tb, "/sync", time.Minute)
	}
	return p
}

// credential prepares dir for the postgres user when this process runs as
// root (Patroni runs initdb and postgres, which refuse root), and returns
// the credential to run Patroni with; nil for another user.
func credential(tb testing.TB, dir string) *syscall.Credential {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	owner(tb, dir)
	info, err := os.Stat(dir)
	if err != nil {
		tb.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	return &syscall.Credential{Uid: st.Uid, Gid: st.Gid}
}

// startEtcd starts a single-member etcd on two free loopback ports and
// waits until it is healthy.
func (p *Patroni) startEtcd(tb testing.TB) {
	tb.Helper()
	client, peer := "http://127.0.0.1:"+freePort(tb), "http://127.0.0.1:"+freePort(tb)
	p.etcdURL = client
	log, err := os.Create(filepath.Join(p.dir, "etcd.log"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = log.Close() })
	p.etcd = exec.Command("etcd", "--name", "idem", "--data-dir", filepath.Join(p.dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "idem="+peer)
	p.etcd.Stdout, p.etcd.Stderr = log, log
	if err := p.etcd.Start(); err != nil {
		tb.Fatalf("pgcluster: etcd: %v", err)
	}
	tb.Cleanup(func() { _ = p.etcd.Process.Kill(); _ = p.etcd.Wait() })
	if !poll(30*time.Second, func() bool { return httpStatus(client+"/health") == http.StatusOK }) {
		tb.Fatalf("pgcluster: etcd is not healthy within 30s; its log:\n%s", tail(log.Name()))
	}
}

// yaml is the node's Patroni configuration: its ports and directories,
// the cluster's timing and replication mode, trust authentication on
// loopback, data checksums (pg_rewind needs them or wal_log_hints).
func (n *PatroniNode) yaml() string {
	ttl := int(n.p.cfg.TTL.Seconds())
	return fmt.Sprintf(`scope: idem
namespace: /idem/
name: %[1]s
restapi:
  listen: 127.0.0.1:%[2]s
  connect_address: 127.0.0.1:%[2]s
etcd3:
  hosts: %[3]s
bootstrap:
  dcs:
    ttl: %[4]d
    loop_wait: 1
    retry_timeout: %[5]d
    maximum_lag_on_failover: 1048576
    synchronous_mode: %[6]t
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 60
        fsync: "off"
  initdb:
  - encoding: UTF8
  - data-checksums
  pg_hba:
  - host replication replicator 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%[7]s
  connect_address: 127.0.0.1:%[7]s
  data_dir: %[8]s
  bin_dir: %[9]s
  pgpass: %[8]s.pgpass
  authentication:
    replication:
      username: replicator
      password: replicator
    superuser:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: %[10]s
`, n.Name, n.apiPort, strings.TrimPrefix(n.p.etcdURL, "http://"), ttl, max(3, (ttl-1)/2), n.p.cfg.Synchronous,
		n.pgPort, n.data, n.p.bin, n.p.dir)
}

// Addr is the host:port of the node's PostgreSQL server.
func (n *PatroniNode) Addr() string { return "127.0.0.1:" + n.pgPort }

// URL is the connection URL of the node's server, as its superuser.
func (n *PatroniNode) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", n.pgPort)
}

// Start starts the node's Patroni process, which starts (and, when
// another node leads, demotes, rewinds and follows with) its server.
func (n *PatroniNode) Start(tb testing.TB) {
	tb.Helper()
	log, err := os.OpenFile(n.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("patroni", n.config)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: n.p.cred, Setpgid: true}
	cmd.Env = append(os.Environ(), "HOME="+n.p.dir)
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		tb.Fatalf("pgcluster: patroni %s: %v", n.Name, err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); _ = log.Close(); close(n.exited) }()
	tb.Cleanup(func() { _ = n.Kill() })
}

// Kill kills the node as the loss of its machine would: its Patroni
// process, then its server (KillServer), all with SIGKILL; Patroni is
// stopped first, so that it sees nothing and restarts nothing. It waits
// until they are gone. It is safe to call on a node already killed.
func (n *PatroniNode) Kill() error {
	select {
	case <-n.exited:
		return nil
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGSTOP)
	err := KillServer(n.data)
	if errors.Is(err, os.ErrNotExist) {
		err = nil // no server running
	}
	_ = n.cmd.Process.Kill()
	<-n.exited
	return err
}

// Is reports whether the node's Patroni REST API answers 200 to a health
// check: "/primary" (it leads and its server takes writes), "/replica"
// (it streams from the leader), "/sync" (it is the synchronous standby).
func (n *PatroniNode) Is(endpoint string) bool {
	return httpStatus("http://127.0.0.1:"+n.apiPort+endpoint) == http.StatusOK
}

// WaitFor waits until the node passes the health check endpoint (see Is),
// at most within; it fails the test then, with the node's log.
func (n *PatroniNode) WaitFor(tb testing.TB, endpoint string, within time.Duration) {
	tb.Helper()
	if !poll(within, func() bool { return n.Is(endpoint) }) {
		tb.Fatalf("pgcluster: %s is not %s within %v; its log:\n%s", n.Name, endpoint, within, n.LogTail())
	}
}

// Logged reports whether the node's Patroni log holds text.
func (n *PatroniNode) Logged(text string) bool {
	data, err := os.ReadFile(n.log)
	return err == nil && strings.Contains(string(data), text)
}

// LogTail returns the last 8 KiB of the node's Patroni log (which holds its
// server's output too), for failure messages.
func (n *PatroniNode) LogTail() string { return tail(n.log) }

// poll calls ok every 20 ms until it is true (true) or within has passed
// (false).
func poll(within time.Duration, ok func() bool) bool {
	for deadline := time.Now().Add(within); ; {
		if ok() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling for another process's state
	}
}

// httpStatus GETs url and returns the status, 0 when no response came
// within a second.
func httpStatus(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// tail returns the last 8 KiB of a file.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(data[max(0, len(data)-8<<10):])
}
