package idemredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// evictionCheckEvery is how old the eviction watch's verdict may grow
// before a claim reads maxmemory-policy again.
const evictionCheckEvery = time.Second

// evictionWatch is what the store last learned of the masters'
// maxmemory-policy, and when it reads it again: a claim reads it when it
// is due, at most once a evictionCheckEvery (other claims meanwhile use
// the last verdict), and a fenced write that finds the record it held
// gone (evicted, or expired) makes it due at once.
type evictionWatch struct {
	mu       sync.Mutex
	due      time.Time // zero: the next claim reads the policy
	checking bool
	refusal  error // nil while every master's policy is noeviction
}

// admit is nil unless the store must refuse claims: a master's policy may
// evict records, or could not be read.
func (s *Store) admit(ctx context.Context) error {
	if s.cfg.AllowEviction {
		return nil
	}
	w := s.watch
	w.mu.Lock()
	if w.checking || s.clock().Before(w.due) {
		defer w.mu.Unlock()
		return w.refusal
	}
	w.checking = true
	w.mu.Unlock()
	return s.watchEviction(ctx)
}

// watchEviction reads every master's policy now, keeps the verdict, and
// logs its changes: an error when claims start being refused, a warning
// when they are accepted again.
func (s *Store) watchEviction(ctx context.Context) error {
	refusal, unread := s.checkEviction(ctx)
	w := s.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checking, w.due = false, s.clock().Add(evictionCheckEvery)
	if unread {
		w.due = time.Time{} // no verdict: the next claim reads it again
	}
	was := w.refusal
	w.refusal = refusal
	switch {
	case refusal != nil && (was == nil || was.Error() != refusal.Error()):
		s.logger().Error("idemredis: claims are refused: Redis may evict the store's records, "+
			"and an evicted record lets a retry run its operation again", "err", refusal)
	case refusal == nil && was != nil:
		s.logger().Warn("idemredis: claims are accepted again: maxmemory-policy is noeviction")
	}
	return refusal
}

// recordGone makes the policy due at once after a fenced write found the
// record it held gone, and reads it.
func (s *Store) recordGone(ctx context.Context) {
	if s.cfg.AllowEviction {
		return
	}
	s.watch.mu.Lock()
	s.watch.due = time.Time{}
	s.watch.mu.Unlock()
	_ = s.admit(ctx)
}

// checkEviction reads maxmemory-policy on every master: an [ErrEviction]
// naming a policy that may evict, or one saying that it could not be read
// (unread).
func (s *Store) checkEviction(ctx context.Context) (refusal error, unread bool) {
	check := func(ctx context.Context, node redis.Cmdable) error {
		policy, err := node.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			unread = true
			return fmt.Errorf("%w (CONFIG GET maxmemory-policy: %w)", ErrEviction, err)
		}
		if p := policy["maxmemory-policy"]; p != "noeviction" {
			return fmt.Errorf("%w: it is %q", ErrEviction, p)
		}
		return nil
	}
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		refusal = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return check(ctx, node) })
	} else {
		refusal = check(ctx, s.c)
	}
	if refusal != nil && !errors.Is(refusal, ErrEviction) {
		unread = true // the cluster's masters could not be listed
		refusal = fmt.Errorf("%w (%w)", ErrEviction, refusal)
	}
	return refusal, unread
}

func (s *Store) clock() time.Time {
	if s.now == nil {
		return time.Now()
	}
	return s.now()
}

func (s *Store) logger() *slog.Logger {
	if s.cfg.Logger == nil {
		return slog.Default()
	}
	return s.cfg.Logger
}
