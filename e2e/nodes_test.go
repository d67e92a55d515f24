package e2e

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/testserver"
)

// nodeConns bounds each node's pool: two nodes stay far below the shared
// server's max_connections, which other packages' tests use at the same
// time.
const nodeConns = 8

// nodes are in-process servers of the payments API, each on a pool of its
// own over one database, as a service's nodes are.
type nodes struct {
	// appName starts the application_name of every node's connections
	// (appName-1, appName-2, ...), by which a test finds their backends.
	appName string
	servers []*httptest.Server
}

// startNodes starts n nodes on the database at dbURL, each running
// api.New(cfg) with cfg's Backend, Store and Logger set to the node's own.
// They stop when the test ends.
func startNodes(t *testing.T, dbURL string, n int, cfg api.Config) *nodes {
	t.Helper()
	ns := &nodes{appName: "e2e-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]}
	for i := 1; i <= n; i++ {
		pool := pgtest.NewPool(t, withParams(t, dbURL, map[string]string{
			"application_name": fmt.Sprintf("%s-%d", ns.appName, i),
			"pool_max_conns":   fmt.Sprint(nodeConns),
		}))
		c := cfg
		c.Backend, c.Store = api.NewPostgresBackend(pool), server.NewPostgresStore(pool)
		c.Logger = slog.New(slog.DiscardHandler)
		srv := httptest.NewServer(api.New(c))
		t.Cleanup(srv.Close) // before the pool closes: cleanups run last first
		ns.servers = append(ns.servers, srv)
	}
	return ns
}

// urls are the nodes' base URLs.
func (ns *nodes) urls() []string {
	var out []string
	for _, s := range ns.servers {
		out = append(out, s.URL)
	}
	return out
}

// close stops the nodes, waiting for the requests they are still serving,
// so that every effect is settled before the database is read.
func (ns *nodes) close() {
	for _, s := range ns.servers {
		s.Close()
	}
}

// balancer puts a testserver proxy with rules in front of the nodes, which
// it uses in turn; no rules make it a plain load balancer. It is closed
// when the test ends.
func balancer(t *testing.T, ns *nodes, cfg testserver.Config) *testserver.Server {
	t.Helper()
	proxy, err := testserver.NewProxy(ns.urls(), cfg)
	if err != nil {
		t.Fatalf("testserver.NewProxy: %v", err)
	}
	t.Cleanup(proxy.Close)
	return proxy
}
