package idemredis

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemredis/internal/redistest"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server/storetest"
)

// TestConformanceOneNode runs the store suite on the machine's Redis.
// Its trace must be one the model allows.
func TestConformanceOneNode(t *testing.T) {
	rec := trace.Start(t)
	t.Cleanup(func() { rec.Require(t, 100) })
	addr := redistest.Addr(t)
	storetest.Run(t, harness(func(t *testing.T) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}, Config{}))
}

// TestConformanceCluster runs the store suite on a three-master Redis
// Cluster that it starts on loopback.
func TestConformanceCluster(t *testing.T) {
	addrs := redistest.Cluster(t, 3)
	storetest.Run(t, harness(func(t *testing.T) redis.UniversalClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}, Config{}))
}
