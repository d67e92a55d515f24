package idemredis

import (
	"errors"
	"strings"
	"time"
)

// Config configures [New]. Its zero value keeps records under the prefix
// "idem", waits for no replica, and refuses a server that may evict keys.
type Config struct {
	// Prefix starts every key of the store (inside its hash tags); two
	// stores with other prefixes share nothing. It must not contain '{'
	// or '}'. Empty: "idem".
	Prefix string

	// Replicas, when positive, makes each claim, takeover and recovery
	// point wait (WAIT) until that many replicas have acknowledged it,
	// at most ReplicaTimeout, before the handler is told it holds the key
	// or may go on: a claim that fewer acknowledge is given back and
	// answered with an error (503 store-unavailable), and Checkpoint
	// returns one. Without it (zero), a failover to a replica that had
	// not received a claim loses it, and a retry then runs the operation
	// again beside the attempt that already acted (BENCHMARKS.md, Redis
	// failover, measures how many); a lost recovery point gives a
	// takeover an older one. Completions, extensions and settlements are
	// never waited for: a lost completion leaves the operation running,
	// and the retry after its lease takes it over with its recovery point.
	// WAIT does not make Redis strongly consistent: the promise holds when
	// the failover promotes a replica that acknowledged (Sentinel and
	// Cluster prefer the most up-to-date). It needs a one-node or Sentinel
	// client (*redis.Client) or a ClusterClient.
	Replicas int

	// ReplicaTimeout bounds each WAIT. Zero or negative: 1 s.
	ReplicaTimeout time.Duration

	// AllowEviction lets [New] start on a server whose maxmemory-policy is
	// not noeviction, or whose policy it cannot read (CONFIG disabled).
	// Every record has an expiry, so the volatile-* policies evict them
	// too, and an evicted record lets a retry run the operation again:
	// set it only where eviction cannot happen.
	AllowEviction bool
}

var errPrefix = errors.New("idemredis: Config.Prefix must not contain '{' or '}': the store's hash tags would break")

// withDefaults is cfg with its zero fields resolved, or an error.
func (cfg Config) withDefaults() (Config, error) {
	if strings.ContainsAny(cfg.Prefix, "{}") {
		return cfg, errPrefix
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "idem"
	}
	if cfg.ReplicaTimeout <= 0 {
		cfg.ReplicaTimeout = time.Second
	}
	return cfg, nil
}
