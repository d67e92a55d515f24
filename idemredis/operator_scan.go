package idemredis

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/server"
)

// exactCountLimit is the most records CountRecords counts exactly.
const exactCountLimit = 10_000

// CountRecords counts the records (see [server.RecordCounts]): the running
// and stuck ones from the running indexes, the records by a scan of the
// keyspace (SCAN on each master), exact up to 10,000 and past that a lower
// bound ([server.CountAtLeast]).
func (s *Store) CountRecords(ctx context.Context) (server.RecordCounts, error) {
	c := server.RecordCounts{RecordsAre: server.CountExact}
	err := s.scanRecords(ctx, func(_ *redis.Client, keys []string) (bool, error) {
		c.Records += int64(len(keys))
		return c.Records <= exactCountLimit, nil
	})
	if err != nil {
		return server.RecordCounts{}, fmt.Errorf("idemredis: count records: %w", err)
	}
	if c.Records > exactCountLimit {
		c.Records, c.RecordsAre = exactCountLimit+1, server.CountAtLeast
	}
	running, err := s.running(ctx)
	if err != nil {
		return server.RecordCounts{}, fmt.Errorf("idemredis: count records: %w", err)
	}
	for _, r := range running {
		c.Running++
		c.OldestRunning = max(c.OldestRunning, r.Age())
		if r.Stuck() {
			c.Stuck++
			c.OldestStuck = max(c.OldestStuck, r.Age())
		}
	}
	return c, nil
}

// FindKey returns the records of key in every scope (see
// [server.RecordStore]). No index has the key: it scans the keyspace
// (SCAN on each master) and reads the key field of every record, as an
// operator's lookup may.
func (s *Store) FindKey(ctx context.Context, key string, limit int) ([]server.Record, error) {
	var out []server.Record
	err := s.scanRecords(ctx, func(node *redis.Client, batch []string) (bool, error) {
		cmds := make([]*redis.StringCmd, len(batch))
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range batch {
				cmds[i] = p.HGet(ctx, k, "ky")
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return false, err
		}
		for i, cmd := range cmds {
			if cmd.Val() != key {
				continue
			}
			rec, found, err := s.read(ctx, keys{record: batch[i]}, false)
			if err != nil {
				return false, err
			}
			if found {
				out = append(out, rec)
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("idemredis: find key: %w", err)
	}
	slices.SortFunc(out, func(a, b server.Record) int { return comparePositions(positionOf(a), positionOf(b)) })
	return out[:min(len(out), max(limit, 0))], nil
}

// scanRecords calls f with each batch of the record keys under the
// store's prefix, master by master, until f says to stop or the scan ends.
func (s *Store) scanRecords(ctx context.Context, f func(node *redis.Client, keys []string) (bool, error)) error {
	pattern := "{" + globEscape(s.cfg.Prefix) + ":*}:r:*"
	stopped := false
	scan := func(ctx context.Context, node *redis.Client) error {
		var cursor uint64
		for !stopped {
			batch, next, err := node.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return err
			}
			mine := slices.DeleteFunc(batch, func(k string) bool { return !s.isRecordKey(k) })
			if len(mine) > 0 {
				more, err := f(node, mine)
				if err != nil {
					return err
				}
				stopped = !more
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
		return nil
	}
	switch c := s.c.(type) {
	case *redis.Client:
		return scan(ctx, c)
	case *redis.ClusterClient:
		var mu sync.Mutex
		return c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			mu.Lock() // f is not safe for concurrent use
			defer mu.Unlock()
			return scan(ctx, node)
		})
	case *redis.Ring:
		var mu sync.Mutex
		return c.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, node)
		})
	}
	return fmt.Errorf("idemredis: cannot scan the keys of a %T", s.c)
}

// isRecordKey reports whether k is a record's key under the store's
// prefix: {prefix:b}:r:<scope hex> with b a bucket.
func (s *Store) isRecordKey(k string) bool {
	rest, ok := strings.CutPrefix(k, "{"+s.cfg.Prefix+":")
	if !ok {
		return false
	}
	b, h, ok := strings.Cut(rest, "}:r:")
	n, err := strconv.Atoi(b)
	if !ok || err != nil || n < 0 || n >= buckets || len(h) != 64 {
		return false
	}
	_, err = hex.DecodeString(h)
	return err == nil
}

// globEscape escapes the characters of s that a SCAN pattern reads as
// glob syntax.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\*?[]^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
