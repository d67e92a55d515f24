package idemredis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemredis/internal/lua"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// Store keeps idempotency records of Leased routes in Redis (or Valkey).
// It is a [server.Store]: hand it to [server.Middleware] for Leased routes,
// and to [server.RunReconciler]. It is safe for concurrent use, and several
// nodes over one Redis share its records.
type Store struct {
	c   redis.UniversalClient
	cfg Config
	// offset is added to Redis's clock by every script; tests move time
	// with it. Nil means zero.
	offset func() time.Duration
	// now is the local clock of the eviction watch's schedule; nil means
	// time.Now.
	now   func() time.Time
	watch *evictionWatch
}

var _ server.Store = (*Store)(nil)

// ErrTransactional is the error of [Store.CheckMode], and of [Store.Claim],
// for a Transactional route.
var ErrTransactional = errors.New("idemredis: a Transactional route needs a store that joins the handler's database " +
	"transaction, and Redis cannot: mount the route with Mode: server.Leased, or on a server.PostgresStore")

// ErrEviction is returned by [New] for a server that may evict keys, and
// by [Store.Claim] while one may (see [Config.AllowEviction]); its text
// names the policy.
var ErrEviction = errors.New("idemredis: Redis may evict keys (maxmemory-policy is not noeviction), " +
	"and an evicted record lets a retry run its operation again: set maxmemory-policy noeviction, or Config.AllowEviction")

// ErrNotReplicated is returned by a claim, a replay, a completion, an
// extension or a Checkpoint that fewer than [Config.Replicas] replicas
// acknowledged within [Config.ReplicaTimeout]. It matches
// context.DeadlineExceeded too: the WAIT's bound passed.
var ErrNotReplicated = errors.New("idemredis: not acknowledged by Config.Replicas replicas within Config.ReplicaTimeout")

// New returns a store on c: a one-node, Sentinel (failover) or Cluster
// client of go-redis. It checks each master's maxmemory-policy (see
// [Config.AllowEviction]) and returns [ErrEviction] when one may evict keys;
// the store checks it again while it runs, and refuses claims while one
// may. ctx governs the check. New does not close c.
func New(ctx context.Context, c redis.UniversalClient, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, ring := c.(*redis.Ring); ring && cfg.Replicas > 0 {
		return nil, errors.New("idemredis: Config.Replicas needs a one-node, Sentinel or Cluster client, not a Ring")
	}
	s := &Store{c: c, cfg: cfg, watch: &evictionWatch{}}
	if !cfg.AllowEviction {
		if err := s.watchEviction(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// CheckMode accepts Leased mode only ([ErrTransactional]).
func (s *Store) CheckMode(m server.Mode) error {
	if m != server.Leased {
		return ErrTransactional
	}
	return nil
}

func (s *Store) millis() int64 {
	if s.offset == nil {
		return 0
	}
	return s.offset().Milliseconds()
}

// Claim judges and claims c's record in one script (lua.Claim), by Redis's
// clock, and with [Config.Replicas] waits for the replicas before the
// handler runs.
func (s *Store) Claim(ctx context.Context, c *server.Claim) (server.ClaimResult, error) {
	if c.Mode != server.Leased {
		return server.ClaimResult{}, ErrTransactional
	}
	if err := s.admit(ctx); err != nil {
		return server.ClaimResult{}, err
	}
	k := keysOf(s.cfg.Prefix, c.Scope, c.Route)
	f := &fence{s: s, k: k, token: uuid.NewString()}
	args := lua.ClaimArgs{Offset: s.millis(), Token: f.token, Alg: c.DigestAlg, Digest: c.Digest,
		Lease: c.Lease.Milliseconds(), Retention: c.Retention.Milliseconds(), DueMember: k.dueMember, RunMember: k.runMember,
		Tenant: c.Tenant, Principal: c.Principal, Route: c.Route, Key: c.Key, Request: c.Request, Touch: s.cfg.Replicas > 0}
	for range 2 {
		start := trace.Begin()
		v, err := s.run(ctx, lua.Claim, []string{k.record, k.due, k.running}, true, args.Argv()...)
		reply, _ := v.([]any)
		kind, _ := at(reply, 0).(string)
		n, _ := at(reply, 1).(int64)
		f.traceClaim(kind, n, start, err)
		switch {
		case errors.Is(err, ErrNotReplicated) && kind == "claimed":
			return s.notReplicated(err, f)
		case errors.Is(err, ErrNotReplicated) && kind == "replay":
			// A response the replicas may not have is not released: a
			// failover could lose it after the client saw it.
			return server.ClaimResult{}, fmt.Errorf("idemredis: replay: %w", err)
		case err != nil && !errors.Is(err, ErrNotReplicated):
			return server.ClaimResult{}, fmt.Errorf("idemredis: claim: %w", err)
		case kind != "alg":
			return f.verdict(kind, reply) // a refusal wrote nothing to wait for
		}
		alg, _ := at(reply, 1).(string)
		digest, known := c.DigestWith(alg)
		args.RecordAlg, args.RecordDigest, args.AnyDigest = alg, digest, !known
	}
	return server.ClaimResult{}, errors.New("idemredis: the record's digest algorithm changed under the claim")
}

// notReplicated gives back a claim that the replicas did not acknowledge
// (as a refused attempt would: the key is released unless an earlier
// attempt left a recovery point), and returns err: the handler never runs.
func (s *Store) notReplicated(err error, f *fence) (server.ClaimResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ReplicaTimeout)
	defer cancel()
	_ = f.Abort(ctx, true)
	return server.ClaimResult{}, err
}

// at is reply[i], or nil past its end.
func at(reply []any, i int) any {
	if i < len(reply) {
		return reply[i]
	}
	return nil
}

// decodeResponse reads a stored status, header and body. The header field
// holds the response's stored form ([server.Response.MarshalBinary]),
// which versions that kept JSON there refuse rather than replay without
// its body. Records of those versions hold the header as JSON (a JSON
// object, or null) beside the status and the body; the JSON branch can go
// once every node writes the stored form and one retention period (the
// longest [server.Config.Retention] of the routes) has passed since.
func decodeResponse(v []any) (*server.Response, error) {
	status, header, body := str(at(v, 0)), str(at(v, 1)), str(at(v, 2))
	if header != "" && header != "null" && header[0] != '{' {
		res := &server.Response{}
		if err := res.UnmarshalBinary([]byte(header)); err != nil {
			return nil, fmt.Errorf("idemredis: stored response: %w", err)
		}
		return res, nil
	}
	res := &server.Response{Header: http.Header{}, Body: []byte(body)}
	if _, err := fmt.Sscan(status, &res.Status); err != nil {
		return nil, fmt.Errorf("idemredis: stored status %q: %w", status, err)
	}
	if header != "" {
		if err := json.Unmarshal([]byte(header), &res.Header); err != nil {
			return nil, fmt.Errorf("idemredis: stored header: %w", err)
		}
	}
	return res, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
