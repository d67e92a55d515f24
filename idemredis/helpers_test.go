package idemredis

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// testPrefix is a key prefix of its own for one test's store: the
// machine's Redis is shared.
func testPrefix() string { return "idemtest-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12] }

// newTestStore is a store on c under a fresh prefix, on clock, whose keys
// are deleted when the test ends.
func newTestStore(t *testing.T, c redis.UniversalClient, cfg Config, clock *storetest.Clock) *Store {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = testPrefix()
	}
	s, err := New(context.Background(), c, cfg)
	require.NoError(t, err)
	s.offset, s.now = clock.Offset, clock.Now
	t.Cleanup(func() { deleteKeys(t, c, cfg.Prefix) })
	return s
}

// deleteKeys deletes the keys under prefix, bucket by bucket (each
// bucket's keys share one node).
func deleteKeys(t *testing.T, c redis.UniversalClient, prefix string) {
	ctx := context.Background()
	for b := range buckets {
		node := c
		if cc, ok := c.(*redis.ClusterClient); ok {
			n, err := cc.MasterForKey(ctx, bucketTag(prefix, b))
			if err != nil {
				return // the cluster is gone already
			}
			node = n
		}
		iter := node.Scan(ctx, 0, bucketTag(prefix, b)+":*", 1000).Iterator()
		for iter.Next(ctx) {
			node.Del(ctx, iter.Val())
		}
	}
}

// harness is the storetest harness of stores on clients made by dial.
func harness(dial func(t *testing.T) redis.UniversalClient, cfg Config) storetest.Harness {
	return storetest.Harness{
		New: func(t *testing.T, clock *storetest.Clock) server.Store {
			return newTestStore(t, dial(t), cfg, clock)
		},
		Node: func(t *testing.T, s server.Store, clock *storetest.Clock) server.Store {
			first := s.(*Store)
			second := *first
			second.c, second.offset, second.now = dial(t), clock.Offset, clock.Now
			return &second
		},
		SelfExpiring: true,
	}
}
