package idemredis

import (
	"errors"
	"log/slog"
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

	// Replicas, when positive, makes every write that a failover must not
	// lose wait (WAIT) until that many replicas have acknowledged it, at
	// most ReplicaTimeout: a claim or takeover before the handler runs, a
	// recovery point or an extension before the handler goes on (Lease's
	// Checkpoint and Extend return [ErrNotReplicated]), a completion (the
	// handler's or a reconciler's) before the response is released, and
	// a replay before the stored response is sent again. A claim that
	// fewer acknowledge is given back and answered 503 store-unavailable;
	// a completion that fewer acknowledge stays written on the master but
	// its response is not sent: the client gets 503 commit-failed with
	// Retry-After, and its retry gets the response once the replicas have
	// it (503 store-unavailable until then), or after a failover that
	// lost the completion, takes the operation over, after its lease,
	// with its recovery point. So a failover to a replica that
	// acknowledged loses no answered operation, and claims none twice.
	// The writes that give a key back (an abort, a reconciler's free or
	// postpone) are not waited for: a lost one leaves the lease to run to
	// its end, and the operation is then taken over with its recovery
	// point.
	//
	// Without it (zero), a failover to a replica that had not received a
	// write loses it: a lost claim lets the retry run the operation again
	// beside the attempt that already acted, and a lost completion, of an
	// operation already answered, lets a later duplicate take it over
	// after its lease (or claim it afresh when the claim was lost too) and
	// get another answer (BENCHMARKS.md, Redis failover, counts both).
	// WAIT does not make Redis strongly consistent: the promise holds when
	// the failover promotes a replica that acknowledged (Sentinel and
	// Cluster prefer the most up-to-date). It needs a one-node or Sentinel
	// client (*redis.Client) or a ClusterClient.
	Replicas int

	// ReplicaTimeout bounds each WAIT. Zero or negative: 1 s.
	ReplicaTimeout time.Duration

	// AllowEviction lets the store run on a server whose
	// maxmemory-policy is not noeviction, or whose policy it cannot read
	// (CONFIG disabled). Without it, [New] refuses such a server
	// ([ErrEviction]), and the store reads the policy again while it runs:
	// a claim reads it when the last reading is over a second old, and a
	// write that finds the record its attempt held gone makes it read at
	// once; while a master's policy may evict (or cannot be read), every
	// claim fails with ErrEviction naming the policy (503
	// store-unavailable), and Logger says so, once, with an error. Every
	// record has an expiry, so the volatile-* policies evict them too, and
	// an evicted record lets a retry run the operation again: set it only
	// where eviction cannot happen.
	AllowEviction bool

	// Logger receives the store's own warnings: claims refused, and
	// accepted again, as the maxmemory-policy changes. Nil:
	// slog.Default().
	Logger *slog.Logger
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
