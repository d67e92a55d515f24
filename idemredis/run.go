package idemredis

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// run runs script sc on keys with args (EVALSHA, and EVAL when the server
// has not cached it). durable, with [Config.Replicas], sends WAIT after it
// on the same connection, and returns [ErrNotReplicated] (with the reply)
// when fewer replicas acknowledged.
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, durable bool, args ...any) (any, error) {
	if !durable || s.cfg.Replicas <= 0 {
		v, err := sc.Run(ctx, s.c, keys, args...).Result()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return v, err
	}
	node, err := s.master(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	v, acked, err := s.runAndWait(ctx, node, sc, keys, args, false)
	if isNoScript(err) {
		v, acked, err = s.runAndWait(ctx, node, sc, keys, args, true)
	}
	if err != nil {
		return nil, err
	}
	if acked < int64(s.cfg.Replicas) {
		// The WAIT's bound passed: context.DeadlineExceeded says so, and the
		// middleware answers a completion refused so with 503 and
		// Retry-After, as it answers a commit that outlasted its bound.
		return v, fmt.Errorf("%w (%d of %d within %s): %w",
			ErrNotReplicated, acked, s.cfg.Replicas, s.cfg.ReplicaTimeout, context.DeadlineExceeded)
	}
	return v, nil
}

// runAndWait pipelines the script and WAIT on one connection of node.
func (s *Store) runAndWait(ctx context.Context, node *redis.Client, sc *redis.Script, keys []string, args []any, eval bool) (any, int64, error) {
	var cmd *redis.Cmd
	var wait *redis.Cmd
	_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		if eval {
			cmd = sc.Eval(ctx, p, keys, args...)
		} else {
			cmd = sc.EvalSha(ctx, p, keys, args...)
		}
		wait = p.Do(ctx, "wait", s.cfg.Replicas, s.cfg.ReplicaTimeout.Milliseconds())
		return nil
	})
	v, cerr := cmd.Result()
	if cerr != nil && !errors.Is(cerr, redis.Nil) {
		return nil, 0, cerr
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, err
	}
	acked, err := wait.Int64()
	if err != nil {
		return nil, 0, fmt.Errorf("WAIT: %w", err)
	}
	return v, acked, nil
}

// master is the client of the node that serves key: c itself, or the
// master of key's slot in a cluster. WAIT counts the replicas of the
// connection's own writes, so it must follow them on their connection.
func (s *Store) master(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.c.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("idemredis: Config.Replicas needs a *redis.Client or a *redis.ClusterClient, not a %T", s.c)
}

// isNoScript reports whether err is Redis's NOSCRIPT reply to an EVALSHA
// of a script it has not cached.
func isNoScript(err error) bool {
	return redis.HasErrorPrefix(err, "NOSCRIPT")
}
