package idemredis

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemredis/internal/lua"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// TakeAbandoned lists the due members of each route's due index in every
// bucket (lua.Due), oldest lease first, and takes each over in a script of
// its own (lua.Take), which checks the record again: an operation that a
// retry or another reconciler took meanwhile is skipped.
func (s *Store) TakeAbandoned(ctx context.Context, routes []string, lease time.Duration, limit int) ([]*server.Taken, error) {
	var due []candidate
	for _, route := range routes {
		for b := range buckets {
			found, err := s.due(ctx, route, b, limit)
			if err != nil {
				return nil, err
			}
			due = append(due, found...)
		}
	}
	slices.SortFunc(due, func(a, b candidate) int { return cmp.Compare(a.score, b.score) })
	var out []*server.Taken
	for _, c := range due {
		if len(out) == limit {
			break
		}
		t, err := s.take(ctx, c.k, lease)
		if err != nil {
			return out, err
		}
		if t != nil {
			out = append(out, t)
		}
	}
	return out, nil
}

// candidate is a member of a due index, by the time it fell due.
type candidate struct {
	k     keys
	score float64
}

// due lists at most limit due operations of route in bucket b.
func (s *Store) due(ctx context.Context, route string, b, limit int) ([]candidate, error) {
	key := bucketTag(s.cfg.Prefix, b) + ":d:" + route
	v, err := lua.Due.Run(ctx, s.c, []string{key}, s.millis(), limit).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("idemredis: due operations: %w", err)
	}
	var out []candidate
	for i := 0; i+1 < len(v); i += 2 {
		var scope [32]byte
		if n, err := hex.Decode(scope[:], []byte(v[i])); err != nil || n != len(scope) {
			continue
		}
		score, _ := strconv.ParseFloat(v[i+1], 64)
		out = append(out, candidate{keysOf(s.cfg.Prefix, scope, route), score})
	}
	return out, nil
}

// take takes one operation over; nil when it was not due after all.
func (s *Store) take(ctx context.Context, k keys, lease time.Duration) (*server.Taken, error) {
	f := &fence{s: s, k: k, token: uuid.NewString()}
	start := trace.Begin()
	v, err := lua.Take.Run(ctx, s.c, []string{k.record, k.due}, s.millis(), f.token, lease.Milliseconds(), k.dueMember).Slice()
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("idemredis: take: %w", err)
	}
	n, _ := at(v, 0).(int64)
	age, _ := at(v, 4).(int64)
	t := &server.Taken{Request: []byte(str(at(v, 3))), Age: time.Duration(age) * time.Millisecond, Settler: f}
	t.Operation = server.Operation{Tenant: str(at(v, 5)), Principal: str(at(v, 6)), Route: str(at(v, 7)), Key: str(at(v, 8)), Attempt: int(n)}
	t.Recovery.Point = str(at(v, 1))
	if data, ok := at(v, 2).(string); ok {
		t.Recovery.Data = json.RawMessage(data)
	}
	f.n = int(n)
	if trace.On() {
		emitRedis(k, trace.Step{Op: trace.Take, New: uuid.MustParse(f.token), OK: true}, start, nil)
	}
	return t, nil
}

// Sweep deletes no record: Redis deletes each at its expiry (the later of
// its retention and its lease's end). It drops, from the oldest members of
// each bucket's running index, at most limit a bucket whose record Redis
// has deleted (an operation left running past its retention), which would
// otherwise stay in the indexes and in Stats. It returns 0.
func (s *Store) Sweep(ctx context.Context, limit int) (int, error) {
	for b := range buckets {
		members, err := s.c.ZRange(ctx, bucketTag(s.cfg.Prefix, b)+":run", 0, int64(limit)-1).Result()
		if err != nil {
			return 0, fmt.Errorf("idemredis: sweep: %w", err)
		}
		for _, m := range members {
			k, ok := keysOfRunning(s.cfg.Prefix, b, m)
			if !ok {
				continue
			}
			if err := lua.Prune.Run(ctx, s.c, []string{k.record, k.due, k.running}, k.dueMember, k.runMember).Err(); err != nil {
				return 0, fmt.Errorf("idemredis: sweep: %w", err)
			}
		}
	}
	return 0, nil
}

// Stats reads each bucket's running index: its size and its oldest claim.
// An operation left running past its retention counts until Sweep drops it.
func (s *Store) Stats(ctx context.Context) (server.StoreStats, error) {
	now, err := s.c.Time(ctx).Result()
	if err != nil {
		return server.StoreStats{}, fmt.Errorf("idemredis: stats: %w", err)
	}
	nowMs := now.UnixMilli() + s.millis()
	var st server.StoreStats
	for b := range buckets {
		key := bucketTag(s.cfg.Prefix, b) + ":run"
		n, err := s.c.ZCard(ctx, key).Result()
		if err != nil {
			return server.StoreStats{}, fmt.Errorf("idemredis: stats: %w", err)
		}
		if n == 0 {
			continue
		}
		st.Running += int(n)
		oldest, err := s.c.ZRangeWithScores(ctx, key, 0, 0).Result()
		if err != nil {
			return server.StoreStats{}, fmt.Errorf("idemredis: stats: %w", err)
		}
		if len(oldest) == 1 {
			st.OldestRunning = max(st.OldestRunning, time.Duration(nowMs-int64(oldest[0].Score))*time.Millisecond)
		}
	}
	return st, nil
}
