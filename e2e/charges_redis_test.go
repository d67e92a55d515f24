//go:build unix

package e2e

import (
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/gobuild"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/testserver"
)

// TestChaosChargesRedis is TestChaosCharges with the charges' records on
// Redis: two processes of idemredis/example/server (-redis, the records
// of POST /v1/charges in an idemredis.Store, the accounts and charges in
// Postgres) behind the chaos proxy, calling the gateway through the
// second proxy with one attempt of at most gatewayTimeout each. The
// ground truth is the same: the database and the gateway, which dedups
// by the forwarded key, so that a charge made twice would show as two.
// The nodes stop gracefully (SIGTERM) before they are read.
func TestChaosChargesRedis(t *testing.T) {
	seed := testserver.Seed(t)
	redisAddr := redisAddr(t)
	bin := filepath.Join(t.TempDir(), "payments-redis-server")
	require.NoError(t, gobuild.BuildIn(filepath.Join("..", "idemredis"), "./example/server", bin))
	run := chargesRun{seed: seed, ops: chargeWorkload(seed, chargeOps(t)), db: openDatabase(t, pgtest.SchemaURL(t)),
		gateway: api.NewGateway(api.GatewayConfig{Logger: slog.New(slog.DiscardHandler)})}
	gw := httptest.NewServer(run.gateway)
	t.Cleanup(gw.Close)
	gwProxy, err := testserver.NewProxy([]string{gw.URL}, testserver.Config{
		Seed: seed, Rules: chaosRules("/v1/charges", gatewayTimeout), HoldTimeout: 2 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(gwProxy.Close)
	prefix := "e2e-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	var nodes []*supervisor
	var urls []string
	for range 2 {
		addr := freeAddr(t)
		nodes = append(nodes, supervise(t, bin, nil, "-addr", addr, "-db", run.db.url, "-redis", redisAddr,
			"-redis-prefix", prefix, "-gateway", gwProxy.URL, "-gateway-timeout", gatewayTimeout.String(),
			"-lease", chargeLease.String(), "-grace", "10s"))
		urls = append(urls, "http://"+addr)
	}
	front, err := testserver.NewProxy(urls, testserver.Config{Seed: seed, Rules: chaosRules("/v1/charges", chaosAttemptTimeout), HoldTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(front.Close)
	p := newPayer(front.URL, clientConfig(chaosAttemptTimeout), chaosDeadline, chaosResendFor)
	p.route = chargesRoute
	watch := watchProgress(chaosStall)
	run.verdicts = runLoad(watch.ctx, p, run.ops, chaosWorkers, watch.onDone)
	watch.close()
	if err := watch.err(run.ops, run.verdicts, p.attempts, "client leg:\n"+testserver.Summarize(front.Events()).String()+
		"\ngateway leg:\n"+testserver.Summarize(gwProxy.Events()).String()); err != nil {
		t.Fatalf("charges (IDEM_SEED=%d): %v", seed, err)
	}
	front.Close()
	takeovers := 0
	for _, n := range nodes {
		n.terminate()
		takeovers += strings.Count(n.logText(), "took over an expired lease")
	}
	gwProxy.Close()
	gw.Close()
	run.events, run.gwLegs = front.Events(), gwProxy.Events()
	client, gateway := testserver.Summarize(run.events), testserver.Summarize(run.gwLegs)
	detail := "client leg:\n" + client.String() + "\ngateway leg:\n" + gateway.String()
	requireChargedOnce(t, run, detail)
	requireDesigned(t, run.ops, run.verdicts, len(run.ops)/100)
	if takeovers == 0 {
		t.Errorf("no attempt took an expired lease over (IDEM_SEED=%d): the run does not test the takeover on Redis\n%s", seed, detail)
	}
	t.Logf("IDEM_SEED=%d, %d takeovers on Redis\n%s", seed, takeovers, detail)
}

// redisAddr is REDIS_ADDR (default 127.0.0.1:6379) once it accepts a
// connection; outside CI the test skips when it does not, under CI=true
// it fails.
func redisAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		msg := fmt.Sprintf("no Redis at %s (REDIS_ADDR): %v", addr, err)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; under CI=true the Redis charges run must run (bash .ci/run starts redis-server)", msg)
		}
		t.Skip(msg + "; skipping the Redis charges run (bash .ci/run starts redis-server)")
	}
	_ = conn.Close()
	return addr
}

// terminate stops the program gracefully (SIGTERM: the requests in flight
// finish) and waits for it, without a restart.
func (s *supervisor) terminate() {
	s.mu.Lock()
	s.stopping = true
	if s.child != nil {
		_ = s.child.Process.Signal(syscall.SIGTERM)
	}
	s.mu.Unlock()
	<-s.done
}
